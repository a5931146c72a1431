package resp

import (
	"context"
	"testing"
)

// TestExistsCountsMetadataOnlyWithItsBytes: EXISTS of a chunk's metadata
// is 1 only while its kv_bytes is held too (LMCache reads both after it),
// while a kv_bytes, or a key without a sibling suffix, counts on its own,
// whatever else is written: with the lease on and off.
func TestExistsCountsMetadataOnlyWithItsBytes(t *testing.T) {
	for _, lease := range []string{"on", "off"} {
		t.Run("lease "+lease, func(t *testing.T) {
			s, _ := testServer(t, func(c *Config, _ *fakeCluster) {
				if lease == "off" {
					c.ExistsLease = -1
				}
			})
			c := client(t, s, 2)
			ctx := context.Background()
			k := "Qwen/Qwen2.5-0.5B-Instruct@1@0@00000000deadbeef@bfloat16"
			exists := func(key string, want int64) {
				t.Helper()
				if n, err := c.Exists(ctx, key).Result(); err != nil || n != want {
					t.Fatalf("EXISTS %s = %d, %v; want %d", key, n, err, want)
				}
			}
			if err := c.Set(ctx, k+"metadata", "meta", 0).Err(); err != nil {
				t.Fatal(err)
			}
			exists(k+"metadata", 0) // its bytes are not held
			if err := c.Set(ctx, k+"kv_bytes", "bytes", 0).Err(); err != nil {
				t.Fatal(err)
			}
			exists(k+"metadata", 1)
			exists(k+"kv_bytes", 1)
			if err := c.Del(ctx, k+"metadata").Err(); err != nil {
				t.Fatal(err)
			}
			exists(k+"kv_bytes", 1) // a kv_bytes stands alone
			if err := c.Set(ctx, "plain@key", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			exists("plain@key", 1)
		})
	}
}

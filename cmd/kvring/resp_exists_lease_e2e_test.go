package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestAnExistsLeaseKeepsTheChunkThroughEviction: on a node with 8 MiB of
// memory, EXISTS of a chunk's metadata pins the metadata and its kv_bytes:
// forty more chunks (20 MiB) written after it evict everything else, and
// both its keys still read back. With --resp-exists-lease -1s the same
// writes evict it. A second EXISTS whose pin does not fit the node's
// pinned-bytes budget (--max-pinned 1MiB) still answers 1, unpinned, and
// kvring_resp_exists_unpinned_total counts it.
func TestAnExistsLeaseKeepsTheChunkThroughEviction(t *testing.T) {
	for _, tc := range []struct {
		lease string
		kept  bool
	}{{"60s", true}, {"-1s", false}} {
		t.Run("lease "+tc.lease, func(t *testing.T) {
			n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0",
				"--memory-limit", "8MiB", "--max-pinned", "1MiB", "--resp-exists-lease", tc.lease)
			c := redis.NewClient(&redis.Options{Addr: n.respAddr(t), MaxRetries: -1, ReadTimeout: 30 * time.Second})
			defer c.Close()
			ctx := context.Background()
			const size, more = 512 << 10, 40
			set := func(i int) {
				t.Helper()
				if err := c.Set(ctx, sibStem(i)+"kv_bytes", sibBytes(i, size), 0).Err(); err != nil {
					t.Fatalf("SET chunk %d kv_bytes: %v", i, err)
				}
				if err := c.Set(ctx, sibStem(i)+"metadata", sibMeta(i), 0).Err(); err != nil {
					t.Fatalf("SET chunk %d metadata: %v", i, err)
				}
			}
			set(0)
			if got := c.Exists(ctx, sibStem(0)+"metadata").Val(); got != 1 {
				t.Fatalf("EXISTS chunk 0 metadata = %d right after its SET", got)
			}
			for i := 1; i <= more; i++ {
				set(i)
			}
			if ev, _ := metricValue(t, n, `kvring_store_evictions_total{reason="policy"}`); ev < more/2 {
				t.Fatalf("%v chunks evicted: the writes did not press the node", ev)
			}
			kv, kerr := c.Get(ctx, sibStem(0)+"kv_bytes").Bytes()
			meta, merr := c.Get(ctx, sibStem(0)+"metadata").Bytes()
			switch {
			case tc.kept && (kerr != nil || merr != nil || !bytes.Equal(kv, sibBytes(0, size)) || !bytes.Equal(meta, sibMeta(0))):
				t.Fatalf("chunk 0 after EXISTS and eviction: GET kv_bytes %d bytes, %v; GET metadata %q, %v", len(kv), kerr, meta, merr)
			case !tc.kept && (!errors.Is(kerr, redis.Nil) || !errors.Is(merr, redis.Nil)):
				t.Fatalf("without a lease chunk 0 outlived 20 MiB of writes to 8 MiB: GET kv_bytes %v, metadata %v", kerr, merr)
			}
			if !tc.kept {
				return
			}
			// Chunk 0 holds most of the 768 KiB one client may pin: the next
			// pin does not fit, and EXISTS answers 1 unpinned.
			if got := c.Exists(ctx, sibStem(more)+"metadata").Val(); got != 1 {
				t.Fatalf("EXISTS of the last chunk's metadata = %d", got)
			}
			if v, _ := metricValue(t, n, "kvring_resp_exists_unpinned_total"); v != 1 {
				t.Fatalf("kvring_resp_exists_unpinned_total = %v after one EXISTS past the pinned-bytes budget, want 1", v)
			}
		})
	}
}

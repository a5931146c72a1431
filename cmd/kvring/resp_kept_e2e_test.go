package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestASetOfAKeyTheNodeHoldsKeepsTheFirstValueWithoutAWrite: on the real
// binary, a second SET of the same bytes to a key the node owns and holds
// answers OK without a write and is counted (kvring_resp_kept_values_total).
// A SET of other bytes is refused: TestASetOfOtherBytesIsRefusedThroughEveryNode.
func TestASetOfAKeyTheNodeHoldsKeepsTheFirstValueWithoutAWrite(t *testing.T) {
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0")
	c := redis.NewClient(&redis.Options{Addr: n.respAddr(t), ReadTimeout: 30 * time.Second})
	defer c.Close()
	ctx := context.Background()
	first := make([]byte, 256<<10)
	rand.Read(first)
	second := bytes.Clone(first)
	const key = "vllm@m@1@0@00ffkv_bytes"
	if err := c.Set(ctx, key, first, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, key, second, 0).Err(); err != nil {
		t.Fatalf("second SET: %v, want OK", err)
	}
	got, err := c.Get(ctx, key).Bytes()
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("GET = %d bytes, %v; want the first value", len(got), err)
	}
	if v, ok := metricValue(t, n, "kvring_resp_kept_values_total"); !ok || v != 1 {
		t.Fatalf("kvring_resp_kept_values_total = %v (%v), want 1", v, ok)
	}
}

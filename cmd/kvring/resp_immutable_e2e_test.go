package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestASetOfOtherBytesIsRefusedThroughEveryNode: values are immutable. In a
// three-node cluster a key written through one node and written again with
// other bytes through each node (the key's owner, which reads the value past
// and compares its checksum, and nodes that are not, whose owner reports the
// held bytes' checksum) is refused with an error every time, and the same
// bytes are OK; every node then reads the first bytes.
func TestASetOfOtherBytesIsRefusedThroughEveryNode(t *testing.T) {
	_, addrs := respCluster(t)
	ctx := context.Background()
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, ReadTimeout: 30 * time.Second})
		defer clients[i].Close()
	}
	for k := range 12 {
		key := fmt.Sprintf("Qwen/Qwen2.5-0.5B-Instruct@1@0@%x@bfloat16kv_bytes", 0xabc000+k)
		first, other := make([]byte, 300<<10), make([]byte, 300<<10)
		rand.Read(first)
		rand.Read(other)
		if err := clients[k%3].Set(ctx, key, first, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		for i, c := range clients {
			err := c.Set(ctx, key, other, 0).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "ERR") || !strings.Contains(err.Error(), "holds other bytes") {
				t.Fatalf("SET of other bytes of %s through node %d: %v, want an error saying the key holds other bytes", key, i, err)
			}
			if err := c.Set(ctx, key, first, 0).Err(); err != nil {
				t.Fatalf("SET of the same bytes of %s through node %d: %v, want OK", key, i, err)
			}
			if got, err := c.Get(ctx, key).Bytes(); err != nil || !bytes.Equal(got, first) {
				t.Fatalf("GET %s through node %d: %d bytes, %v; want the first value", key, i, len(got), err)
			}
		}
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// TestSlowSetsCannotTakeTheNodesMemory: on the real binary (64 MiB of
// memory, so a budget of 32 MiB for values being received), seven
// connections declare 8 MiB values and send three bytes each. They hold at
// most the budget (the rest wait for room, then are refused -OOM at their
// command's deadline), the values stored before
// them all read back, and another client's SET still succeeds. Without the
// budget the seven held 56 MiB and the stored values were evicted.
func TestSlowSetsCannotTakeTheNodesMemory(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0",
		"--resp-addr", "127.0.0.1:0", "--memory-limit", "64MiB")
	addr := n.respAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 30 * time.Second})
	defer c.Close()
	ctx := context.Background()
	stored := map[string][]byte{}
	for i := range 16 {
		k, v := fmt.Sprintf("victim-%d", i), bytes.Repeat([]byte{byte(i + 1)}, 1<<20)
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		stored[k] = v
	}
	const value, slow = 8 << 20, 7
	for i := range slow {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$6\r\nslow-%d\r\n$%d\r\nabc", i, value)
	}
	var held, refused, waiting float64
	testutil.Eventually(t, "every slow SET to hold its value's memory, wait for it or be refused it", 30*time.Second, func() bool {
		held, _ = metricValue(t, n, "kvring_resp_value_bytes")
		refused, _ = metricValue(t, n, "kvring_resp_values_refused_total")
		waiting, _ = metricValue(t, n, "kvring_resp_values_waiting")
		return held/value+refused+waiting == slow
	})
	t.Logf("slow SETs: %.0f MiB held, %.0f waiting, %.0f refused", held/(1<<20), waiting, refused)
	if held > 32<<20 {
		t.Errorf("slow SETs hold %.0f bytes of shared memory; the budget is 32 MiB", held)
	}
	for k, want := range stored {
		got, err := c.Get(ctx, k).Bytes()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("GET %s beside slow SETs: %d bytes, %v (the stored value was evicted)", k, len(got), err)
		}
	}
	if err := c.Set(ctx, "another", bytes.Repeat([]byte{'x'}, 1<<20), 0).Err(); err != nil {
		t.Fatalf("another SET beside slow SETs: %v", err)
	}
}

package resp

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/tenant"
)

// TestSlowValuesCannotTakeTheMemory: connections that declare large SET
// values and send them slowly hold shared memory while they do. Before the
// values budget, seven of them (8 MiB each) took so much of a 64 MiB node
// that its sealed chunks were evicted and a GET of them returned nil. With
// it, they hold at most the budget (the rest wait for room until their
// command's deadline, then are read past and answered -OOM), the stored
// values stay readable and another client's SET is stored.
func TestSlowValuesCannotTakeTheMemory(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) { c.MaxValueBytes = 32 << 20 })
	victim := client(t, s, 2)
	ctx := context.Background()
	stored := map[string][]byte{}
	for i := range 16 {
		k, v := fmt.Sprintf("victim-%d", i), bytes.Repeat([]byte{byte(i + 1)}, 1<<20)
		if err := victim.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		stored[k] = v
	}
	const value = 8 << 20
	for i := range 7 {
		nc, _ := rawConn(t, s)
		fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$6\r\nslow-%d\r\n$%d\r\nabc", i, value)
	}
	// Wait until every slow SET was read up to its value: each holds its
	// value's memory, waits for room, or was refused it.
	deadline := time.Now().Add(20 * time.Second)
	for s.cfg.Store.Stats().Blobs+s.values.refusals()+int64(s.values.waiters()) < 7 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s, %d slow SETs hold memory, %d wait and %d were refused, of 7",
				s.cfg.Store.Stats().Blobs, s.values.waiters(), s.values.refusals())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if held := s.cfg.Store.Stats().BlobBytes; held > 32<<20 {
		t.Errorf("slow SETs hold %d bytes of shared memory; the values budget is %d", held, 32<<20)
	}
	for k, want := range stored {
		got, err := victim.Get(ctx, k).Bytes()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("GET %s beside slow SETs: %d bytes, %v (the stored value was evicted)", k, len(got), err)
		}
	}
	other := client(t, s, 2)
	if err := other.Set(ctx, "another", bytes.Repeat([]byte{'x'}, 1<<20), 0).Err(); err != nil {
		t.Fatalf("another client's SET beside slow SETs: %v", err)
	}
}

// TestWritesAreMadeForTheirClient: the cluster learns which client a SET
// is for (package tenant), so the owners charge its staged bytes to that
// client's share: its token after AUTH, its connection before.
func TestWritesAreMadeForTheirClient(t *testing.T) {
	s, fc := testServer(t, func(_ *Config, fc *fakeCluster) {
		fc.tokens = map[string]Access{"engine-token-0123456789": {}}
	})
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.Do(ctx, "AUTH", "engine-token-0123456789").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	got := append([]string(nil), fc.publishedFor...)
	fc.mu.Unlock()
	want := tenant.Name("engine-token-0123456789", nil)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("SET after AUTH was published for clients %q, want [%q]", got, want)
	}
}

package loadtest

import (
	"context"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/loadtest/trace"
)

// startRedis starts a redis-server with extra arguments for the test
// (testutil.StartRedis).
func startRedis(t *testing.T, args ...string) (addr string, kill func()) {
	return testutil.StartRedis(t, args...)
}

func newTestRedis(t *testing.T, addr string) *Redis {
	t.Helper()
	r, err := NewRedis(RedisConfig{Addr: addr, Namespace: "test", CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRedisRoundTripsAndFailsHonestlyWhenDown(t *testing.T) {
	addr, kill := startRedis(t)
	r := newTestRedis(t, addr)
	ctx := context.Background()
	ids := BlockChunkIDs(7, 6)

	if held, err := r.Lookup(ctx, ids, ids); err != nil || held != 0 {
		t.Fatalf("lookup of an empty server: %d, %v", held, err)
	}
	var chunks []Chunk
	for _, id := range ids[:4] {
		chunks = append(chunks, Chunk{ID: id, Data: ChunkBytes(id, 1024)})
	}
	outs, err := r.Put(ctx, chunks)
	if err != nil || len(outs) != 4 {
		t.Fatalf("put: %v, %v", outs, err)
	}
	for i, o := range outs {
		if o != Stored {
			t.Fatalf("put outcome %d: %v", i, o)
		}
	}
	if held, err := r.Lookup(ctx, ids, ids); err != nil || held != 4 {
		t.Fatalf("lookup: %d, %v; want 4", held, err)
	}
	// A hole ends the held prefix.
	if held, err := r.Lookup(ctx, []ChunkID{ids[0], ids[5], ids[1]}, nil); err != nil || held != 1 {
		t.Fatalf("lookup with a hole: %d, %v; want 1", held, err)
	}
	got, err := r.Get(ctx, ids, ids)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("get: %d outcomes, %v", len(got), err)
	}
	for i, g := range got {
		if want := i < 4; g.Found != want {
			t.Fatalf("get %d: found %v, want %v", i, g.Found, want)
		}
		if g.Found && (len(g.Data) != 1024 || !VerifyChunk(ids[i], g.Data)) {
			t.Fatalf("get %d: %d bytes that do not verify", i, len(g.Data))
		}
	}
	// Another namespace sees none of it.
	other, err := NewRedis(RedisConfig{Addr: addr, Namespace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if held, err := other.Lookup(ctx, ids, ids); err != nil || held != 0 {
		t.Fatalf("lookup in another namespace: %d, %v", held, err)
	}

	kill() // its port is closed once it has exited
	if _, err := r.Lookup(ctx, ids, ids); err == nil {
		t.Fatal("lookup against a stopped redis succeeded")
	}
	if _, err := r.Get(ctx, ids, ids); err == nil {
		t.Fatal("get against a stopped redis succeeded")
	}
	if outs, err := r.Put(ctx, chunks); err == nil {
		t.Fatalf("put against a stopped redis succeeded: %v", outs)
	}
	if err := r.Ping(ctx); err == nil {
		t.Fatal("ping against a stopped redis succeeded")
	}
}

func TestRedisOutOfMemoryIsFailed(t *testing.T) {
	addr, _ := startRedis(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	r := newTestRedis(t, addr)
	var chunks []Chunk
	for _, id := range BlockChunkIDs(1, 64) {
		chunks = append(chunks, Chunk{ID: id, Data: ChunkBytes(id, 256<<10)})
	}
	outs, err := r.Put(context.Background(), chunks)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	counts := map[PutOutcome]int{}
	for _, o := range outs {
		counts[o]++
	}
	if counts[Stored] == 0 || counts[Failed] == 0 || counts[Stored]+counts[Failed] != len(chunks) {
		t.Fatalf("outcomes over a 2 MB noeviction budget: %v", counts)
	}
}

func TestRedisEvictsUnderLRUAndTheReplayStaysHonest(t *testing.T) {
	addr, _ := startRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	var backends []Backend
	for range 2 {
		backends = append(backends, newTestRedis(t, addr))
	}
	var reqs []trace.Request
	for i := range 40 {
		reqs = append(reqs, trace.Request{Timestamp: time.Duration(i), InputLength: 1024, HashIDs: []int64{int64(i % 3), int64(100 + i)}})
	}
	rep, err := ReplayMooncake(context.Background(), reqs, backends,
		Config{ChunkTokens: 64, BytesPerToken: 1024, Speedup: -1, Backend: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RequestsDone != len(reqs) || rep.Corrupt != 0 || rep.Failed != 0 || rep.Stored == 0 || rep.ChunkHits == 0 {
		t.Fatalf("report: %+v", rep)
	}
	ev, err := backends[0].(*Redis).Evictions(context.Background())
	if err != nil || ev == 0 {
		t.Fatalf("evictions over a 4 MB budget: %d, %v", ev, err)
	}
}

package loadtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/loadtest/trace"
)

// racingEngines forces, without sleeping, the interleaving in which engine B
// looks up a chunk before engine A's put of it is acknowledged, and hears the
// answer only after the runner has recorded that ack:
//
//	A: lookup(req 0) → miss; put(req 0) waits for B's answer
//	B: lookup(req 1) begins, computes "not held", lets A's put go on, waits
//	A: put(req 0) stored → runner records the ack → lookup(req 2) releases B
//	B: lookup(req 1) returns "not held"
//
// B's answer was true when it was computed: nothing was lost.
type racingEngines struct {
	mem         *Memory
	bAnswered   chan struct{} // closed once B's lookup has computed its answer
	ackRecorded chan struct{} // closed by A's second lookup: the runner recorded req 0's ack
	once        sync.Once
}

type racingEngine struct {
	*racingEngines
	b       bool
	lookups int
}

func (e *racingEngine) wait(ctx context.Context, ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *racingEngine) Lookup(ctx context.Context, ids, groups []ChunkID) (int, error) {
	e.lookups++
	n, err := e.mem.Lookup(ctx, ids, groups)
	switch {
	case e.b && e.lookups == 1:
		close(e.bAnswered)
		if werr := e.wait(ctx, e.ackRecorded); werr != nil {
			return 0, werr
		}
	case !e.b && e.lookups == 2:
		// serve records a put's outcomes before it returns: the engine's
		// next lookup comes after the ack is recorded.
		e.once.Do(func() { close(e.ackRecorded) })
	}
	return n, err
}

func (e *racingEngine) Get(ctx context.Context, ids, groups []ChunkID) ([]GetOutcome, error) {
	return e.mem.Get(ctx, ids, groups)
}

func (e *racingEngine) Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error) {
	if !e.b {
		if err := e.wait(ctx, e.bAnswered); err != nil {
			return nil, err
		}
	}
	return e.mem.Put(ctx, chunks)
}

func (e *racingEngine) Close() error { return nil }

// TestMissingAfterAckCountsOnlyLookupsThatBeganAfterTheAck: a lookup that
// began before another engine's put was acknowledged may rightly answer
// "not held"; only a lookup that began after the ack and misses the chunk
// reports it missing after the ack.
func TestMissingAfterAckCountsOnlyLookupsThatBeganAfterTheAck(t *testing.T) {
	shared := &racingEngines{mem: NewMemory(0), bAnswered: make(chan struct{}), ackRecorded: make(chan struct{})}
	a, b := &racingEngine{racingEngines: shared}, &racingEngine{racingEngines: shared, b: true}
	reqs := []trace.Request{ // round-robin: A, B, A
		{InputLength: 512, HashIDs: []int64{1}},
		{InputLength: 512, HashIDs: []int64{1}},
		{InputLength: 512, HashIDs: []int64{1}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := ReplayMooncake(ctx, reqs, []Backend{a, b}, Config{Speedup: -1})
	if err != nil {
		t.Fatal(err)
	}
	if b.lookups != 1 || a.lookups != 2 {
		t.Fatalf("lookups A %d B %d, want 2 and 1: the interleaving was not forced", a.lookups, b.lookups)
	}
	// B put the 32 chunks again (already held); request 2 hit them all.
	if rep.Stored != 32 || rep.AlreadyHeld != 32 || rep.ChunkHits != 32 {
		t.Fatalf("stored %d already held %d hits %d, want 32, 32, 32", rep.Stored, rep.AlreadyHeld, rep.ChunkHits)
	}
	if rep.MissingAfterAck != 0 || rep.MissingFoundLater != 0 {
		t.Fatalf("missing_after_ack=%d (found again %d), want 0: B's lookup began before A's ack",
			rep.MissingAfterAck, rep.MissingFoundLater)
	}
}

// TestMissingAfterAckOrdersByTimeNotByBookkeeping drives the runner's
// bookkeeping with explicit instants: whichever of a miss and an ack is
// recorded first, the miss counts when and only when its call began at or
// after the ack, and once per ack.
func TestMissingAfterAckOrdersByTimeNotByBookkeeping(t *testing.T) {
	c := PlannedChunk{Block: 7, Index: 3}
	t0 := time.Now()
	ack, before, after := t0.Add(time.Second), t0, t0.Add(2*time.Second)
	for _, tc := range []struct {
		name      string
		missFirst bool
		began     time.Time
		want      int64
	}{
		{"ack recorded first, call began before it", false, before, 0},
		{"ack recorded first, call began after it", false, after, 1},
		{"miss recorded first, call began before the ack", true, before, 0},
		{"miss recorded first, call began after the ack", true, after, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(Config{}.withDefaults())
			var tl tally
			ackAt := func(o PutOutcome, at time.Time) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.ackLocked(c, o, at, &tl)
			}
			if tc.missFirst {
				r.lost(c, tc.began, &tl)
				ackAt(Stored, ack)
			} else {
				ackAt(Stored, ack)
				r.lost(c, tc.began, &tl)
			}
			if tl.missingAfterAck != tc.want {
				t.Fatalf("missing after ack %d, want %d", tl.missingAfterAck, tc.want)
			}
			if tc.want == 0 {
				return
			}
			r.lost(c, after.Add(time.Second), &tl) // no ack since: not counted again
			ackAt(AlreadyHeld, after.Add(2*time.Second))
			if tl.missingAfterAck != 1 || r.foundAgain != 1 {
				t.Fatalf("missing after ack %d found again %d, want 1 and 1 (held all along)", tl.missingAfterAck, r.foundAgain)
			}
		})
	}
}

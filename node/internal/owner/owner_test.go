package owner

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// testClock is a clock the test moves; safe for concurrent use.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newTestOwner opens a store on an injected clock, without its background
// loop, and an Owner over it on the same clock.
func newTestOwner(t *testing.T) (*Owner, *store.Store, *testClock) {
	t.Helper()
	return newTestOwnerSized(t, 8<<20)
}

// newTestOwnerSized is newTestOwner with a store of memory bytes.
func newTestOwnerSized(t testing.TB, memory int64) (*Owner, *store.Store, *testClock) {
	t.Helper()
	clock := &testClock{}
	clock.ns.Store(time.Unix(1000, 0).UnixNano())
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: t.TempDir(), MemoryLimit: memory,
		StageLease: 30 * time.Second, MaintenanceInterval: -1, Now: clock.now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := namespace.NewRegistry()
	// The tests write under namespace "ns" with a zero fingerprint: known here.
	if _, _, err := reg.Merge(&kvringv1.NamespaceRecord{Name: "ns", Fingerprint: make([]byte, 32)}); err != nil {
		t.Fatal(err)
	}
	o := New(Config{Store: st, Log: slog.New(slog.DiscardHandler), Registry: reg,
		Epoch: func() uint64 { return 1 }, MaxBatch: 64, MaxPin: time.Minute, Now: clock.now, Metrics: metrics.New()})
	return o, st, clock
}

// stageReady runs a prepare phase for one chunk and returns its READY token.
func stageReady(t *testing.T, o *Owner, ref *kvringv1.NamespaceRef, id store.ID, data []byte) uint64 {
	t.Helper()
	p, need, _, err := o.NewPrepare(ref, []*kvringv1.ChunkRef{{Id: id[:], Size: uint64(len(data)), Crc32C: store.Checksum(data)}}, nil)
	if err != nil || len(need) != 1 {
		t.Fatalf("prepare: need %v, %v", need, err)
	}
	if err := p.Frame(transfer.Frame{Index: 0, Data: [][]byte{data}}); err != nil {
		t.Fatal(err)
	}
	votes := o.EndPrepare(p)
	if len(votes) != 1 || votes[0].GetVote() != kvringv1.Vote_VOTE_READY {
		t.Fatalf("votes %v, want one READY", votes)
	}
	return votes[0].GetStageToken()
}

// TestACommitAfterTheStageLeaseFailsAndHoldsNothing: a chunk voted ready whose
// commit comes after the store's stage lease ended is reported failed (never
// sealed), its slot is free, and the owner forgets the token once the store
// expired it. The lease is the store's alone, on the injected clock.
func TestACommitAfterTheStageLeaseFailsAndHoldsNothing(t *testing.T) {
	t.Parallel()
	o, st, clock := newTestOwner(t)
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	var id store.ID
	id[0] = 7
	data := []byte(strings.Repeat("kv", 5000))
	tok := stageReady(t, o, ref, id, data)

	o.Sweep() // the lease runs: the token stays
	if o.Tokens() != 1 {
		t.Fatalf("%d tokens before the lease ended, want 1", o.Tokens())
	}
	clock.advance(31 * time.Second)
	if staged, _ := st.ExpireNow(); staged != 1 {
		t.Fatalf("the store expired %d staged chunks, want 1", staged)
	}
	o.Sweep()
	if o.Tokens() != 0 {
		t.Fatalf("%d tokens after the store expired the slot, want 0", o.Tokens())
	}
	res := o.Commit("", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: id[:]}})
	if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_FAILED {
		t.Fatalf("commit after the lease: %v, want failed", res[0])
	}
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	if st.Contains(ns, id) {
		t.Fatal("the chunk is held after a commit that came too late")
	}
	if s := st.Stats(); s.StagedBytes != 0 || s.UsedBytes != 0 {
		t.Fatalf("staged %d, used %d bytes after the lease ended, want 0", s.StagedBytes, s.UsedBytes)
	}
}

// TestACommitJustBeforeTheLeaseEndsSeals: the same commit a moment earlier
// seals the chunk, and a retry of it reports sealed again.
func TestACommitJustBeforeTheLeaseEndsSeals(t *testing.T) {
	t.Parallel()
	o, st, clock := newTestOwner(t)
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	var id store.ID
	id[0] = 8
	data := []byte(strings.Repeat("kv", 5000))
	tok := stageReady(t, o, ref, id, data)
	clock.advance(29 * time.Second)
	st.ExpireNow()
	for range 2 {
		res := o.Commit("", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: id[:]}})
		if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
			t.Fatalf("commit within the lease: %v, want sealed", res[0])
		}
	}
	if !st.Contains(namespace.StoreName(ref.GetName(), ref.GetFingerprint()), id) {
		t.Fatal("the chunk is not held after its commit")
	}
}

// TestHasRefusesMoreIDsThanOneCall: a caller cannot check (and pin) more
// chunks in one Has than one engine call may carry.
func TestHasRefusesMoreIDsThanOneCall(t *testing.T) {
	t.Parallel()
	o, _, _ := newTestOwner(t)
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	ids := make([][]byte, 65) // MaxBatch is 64
	for i := range ids {
		ids[i] = make([]byte, 32)
		ids[i][0] = byte(i)
	}
	if _, _, err := o.Has("", ref, ids, &kvringv1.LeasePin{LeaseId: 7, TtlMs: 1000}); !errors.Is(err, transfer.ErrInvalidArgument) {
		t.Fatalf("Has of 65 ids: %v, want InvalidArgument", err)
	}
	if _, _, err := o.Has("", ref, ids[:64], nil); err != nil {
		t.Fatalf("Has of 64 ids: %v", err)
	}
}

// TestAnotherCallersTokenCanNeitherCommitNorAbort: a stage token is bound to
// the caller whose prepare staged it; another caller's Abort leaves it and
// its Commit fails as unknown, and the right caller still commits. Tokens
// are random, not a sequence another caller could step through.
func TestAnotherCallersTokenCanNeitherCommitNorAbort(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwner(t)
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	stage := func(n byte) (store.ID, uint64) {
		var id store.ID
		id[0] = n
		data := []byte("chunk bytes")
		p, _, _, err := o.NewPrepare(ref, []*kvringv1.ChunkRef{{Id: id[:], Size: uint64(len(data)), Crc32C: store.Checksum(data)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.caller = "peer 10.0.0.1:5000"
		if err := p.Frame(transfer.Frame{Index: 0, Data: [][]byte{data}}); err != nil {
			t.Fatal(err)
		}
		return id, o.EndPrepare(p)[0].GetStageToken()
	}
	id, tok := stage(1)
	_, tok2 := stage(2)
	if d := int64(tok2 - tok); d > -1000 && d < 1000 {
		t.Fatalf("tokens %d and %d are close: guessable", tok, tok2)
	}
	o.AbortTokens("peer 10.0.0.2:6000", []uint64{tok})
	res := o.Commit("peer 10.0.0.2:6000", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: id[:]}})
	if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_FAILED {
		t.Fatalf("another caller's commit: %v", res[0])
	}
	res = o.Commit("peer 10.0.0.1:5000", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: id[:]}})
	if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
		t.Fatalf("the staging caller's commit after another's abort: %v", res[0])
	}
	if !st.Contains(namespace.StoreName("ns", ref.GetFingerprint()), id) {
		t.Fatal("the chunk is not held")
	}
}

// TestPrepareWritesOnlyIntoRegisteredNamespaces: a prepare under a name
// this node does not know, or under another fingerprint, stages nothing.
func TestPrepareWritesOnlyIntoRegisteredNamespaces(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwner(t)
	data := []byte("bytes")
	var id store.ID
	chunks := []*kvringv1.ChunkRef{{Id: id[:], Size: uint64(len(data)), Crc32C: store.Checksum(data)}}
	if _, _, _, err := o.NewPrepare(&kvringv1.NamespaceRef{Name: "unknown", Fingerprint: make([]byte, 32)}, chunks, nil); !errors.Is(err, transfer.ErrUnknownNamespace) {
		t.Fatalf("prepare into an unknown namespace: %v", err)
	}
	other := bytes.Repeat([]byte{1}, 32)
	if _, _, _, err := o.NewPrepare(&kvringv1.NamespaceRef{Name: "ns", Fingerprint: other}, chunks, nil); !errors.Is(err, transfer.ErrSchemaMismatch) {
		t.Fatalf("prepare under another fingerprint: %v", err)
	}
	if s := st.Stats(); s.StagedChunks != 0 {
		t.Fatalf("%d chunks staged", s.StagedChunks)
	}
}

// TestAConnectionThatEndsFreesItsUncommittedChunks: a chunk voted ready for
// a coordinator whose Peer connection then ends is freed at once (no commit
// can come from a connection that is gone), while another caller's chunk
// stays staged for its commit.
func TestAConnectionThatEndsFreesItsUncommittedChunks(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwner(t)
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	gone := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40001}
	stays := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40002}
	stage := func(id store.ID, from net.Addr) uint64 {
		data := []byte(strings.Repeat("kv", 100))
		p, need, _, err := o.NewPrepare(ref, []*kvringv1.ChunkRef{{Id: id[:], Size: uint64(len(data)), Crc32C: store.Checksum(data)}}, nil)
		if err != nil || len(need) != 1 {
			t.Fatalf("prepare: %v %v", need, err)
		}
		p.caller = callerAt(from)
		if err := p.Frame(transfer.Frame{Index: 0, Data: [][]byte{data}}); err != nil {
			t.Fatal(err)
		}
		votes := o.EndPrepare(p)
		return votes[0].GetStageToken()
	}
	var a, b store.ID
	a[0], b[0] = 1, 2
	stage(a, gone)
	tokB := stage(b, stays)
	o.ConnClosed(gone)
	if st.Staging("ns:0000000000000000", a) || o.Tokens() != 1 {
		t.Fatalf("the gone caller's chunk is still staged (tokens %d)", o.Tokens())
	}
	res := o.Commit(callerAt(stays), ref, []*kvringv1.StagedChunk{{StageToken: tokB, Id: b[:]}})
	if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
		t.Fatalf("the other caller's commit: %+v", res[0])
	}
}

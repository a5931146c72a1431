package coord

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// fakeOwner is an owner's side of a write as a test scripts it: it needs
// every chunk, takes the frames, votes ready (or finishVotes' votes, with
// finishErr) and answers commits with commitStatus (or commitErr). It
// records what it was sent, committed and aborted. Its session is used by
// one goroutine at a time; the record is read after the write.
type fakeOwner struct {
	mu           sync.Mutex
	finishErr    error
	commitErr    error
	commitStatus kvringv1.CommitStatus
	commitCode   uint32
	got          []byte
	committed    []uint64
	aborted      []uint64
	closed       bool
	n            int // chunks of its share
}

func (f *fakeOwner) begin(_ context.Context, _ *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, _ []*kvringv1.GroupRun) ([]uint32, []*kvringv1.ChunkVote, error) {
	f.n = len(chunks)
	need := make([]uint32, len(chunks))
	for i := range need {
		need[i] = uint32(i)
	}
	return need, nil, nil
}

func (f *fakeOwner) send(fr transfer.Frame) error {
	for _, b := range fr.Data {
		f.got = append(f.got, b...)
	}
	return nil
}

func (f *fakeOwner) finish() ([]*kvringv1.ChunkVote, error) {
	votes := make([]*kvringv1.ChunkVote, f.n)
	for i := range votes {
		votes[i] = &kvringv1.ChunkVote{Index: uint32(i), Vote: kvringv1.Vote_VOTE_READY, StageToken: uint64(100 + i)}
	}
	return votes, f.finishErr
}

func (f *fakeOwner) commit(_ context.Context, _ *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) ([]*kvringv1.CommitResult, error) {
	if f.commitErr != nil {
		return nil, f.commitErr
	}
	out := make([]*kvringv1.CommitResult, len(chunks))
	for i, c := range chunks {
		f.mu.Lock()
		f.committed = append(f.committed, c.GetStageToken())
		f.mu.Unlock()
		out[i] = &kvringv1.CommitResult{Status: f.commitStatus, Code: f.commitCode, Reason: "scripted"}
	}
	return out, nil
}

func (f *fakeOwner) abort(_ context.Context, tokens []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted = append(f.aborted, tokens...)
}

func (f *fakeOwner) close() { f.closed = true }

// bytesData is a data phase that sends each chunk's bytes from memory.
type bytesData struct{ data [][]byte }

func (bytesData) slot(*writeTx, *ownerShare) owner.SlotFunc { return nil }

func (d bytesData) deliver(_ context.Context, tx *writeTx, _ []*kvringv1.PutChunkResult) error {
	for _, idx := range tx.need {
		tx.sinks[idx].writeChunk(d.data[idx])
	}
	return nil
}

// fakeWrite is a write of one chunk of data to the fake owners (by member
// id), with replicas and min replicas as given.
func fakeWrite(t *testing.T, data []byte, replicas, minReplicas int, owners map[string]*fakeOwner) *writeTx {
	t.Helper()
	c := New(Config{Self: "self", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.New(), Now: time.Now,
		CommitTimeout: time.Minute, PeerTimeout: time.Minute, MaxBatch: 16})
	t.Cleanup(c.Close)
	c.open = func(_ context.Context, m ring.Member, _ owner.SlotFunc, _ spreadMark) (putSession, error) {
		if f := owners[m.ID]; f != nil {
			return f, nil
		}
		return nil, errors.New("no such owner")
	}
	id := make([]byte, 32)
	ch := &kvringv1.ChunkRef{Id: id, Size: uint64(len(data))}
	tx := &writeTx{c: c, ref: &kvringv1.NamespaceRef{Name: "ns"}, chunks: []*kvringv1.ChunkRef{ch}, keys: [][]byte{id},
		replicas: replicas, minReplicas: minReplicas, data: bytesData{data: [][]byte{data}}, shares: map[string]*ownerShare{},
		owners: make([][]*ownerShare, 1)}
	ms := make([]string, 0, len(owners))
	for id := range owners {
		ms = append(ms, id)
	}
	slices.Sort(ms)
	for _, id := range ms {
		tx.addTo(id, ring.Member{ID: id, Addr: id + ":1"}, 0, ch)
	}
	return tx
}

// runFake runs tx and returns its one chunk's result.
func runFake(t *testing.T, tx *writeTx) *kvringv1.PutChunkResult {
	t.Helper()
	settled, err := tx.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(settled) > 0 {
		return settled[0]
	}
	return tx.results()[0]
}

func sealing() *fakeOwner {
	return &fakeOwner{commitStatus: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}
}

// TestAChunkIsStoredOnlyWhenMinReplicasOwnersSealedIt: one owner seals and
// one fails its commit: with min replicas 1 the chunk is stored, degraded,
// held by the one; with min replicas 2 it fails, and the result still
// names the one holder and says how many were required.
func TestAChunkIsStoredOnlyWhenMinReplicasOwnersSealedIt(t *testing.T) {
	t.Parallel()
	data := []byte(strings.Repeat("kv", 3000))
	for _, minR := range []int{1, 2} {
		a, b := sealing(), &fakeOwner{commitStatus: kvringv1.CommitStatus_COMMIT_STATUS_FAILED}
		r := runFake(t, fakeWrite(t, data, 2, minR, map[string]*fakeOwner{"a": a, "b": b}))
		if len(r.GetHolders()) != 1 || r.GetHolders()[0].GetNodeId() != "a" {
			t.Fatalf("min %d: holders %v, want a alone", minR, r.GetHolders())
		}
		switch minR {
		case 1:
			if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || !r.GetDegraded() || !strings.Contains(r.GetReason(), "commit failed") {
				t.Fatalf("min 1: %+v, want stored, degraded, with b's reason", r)
			}
		case 2:
			if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_FAILED || !strings.Contains(r.GetReason(), "held by 1 of the 2 required replicas") {
				t.Fatalf("min 2: %+v, want failed, held by 1 of 2", r)
			}
		}
		if string(a.got) != string(data) || string(b.got) != string(data) {
			t.Fatal("an owner was not sent the chunk's bytes")
		}
	}
}

// TestAChunkEveryOwnerRejectsAtTheSealIsRejected: rejected (not failed:
// a decision, not a fault) when every owner's policy declines it at the
// seal; failed when one of them failed instead.
func TestAChunkEveryOwnerRejectsAtTheSealIsRejected(t *testing.T) {
	t.Parallel()
	rejecting := func() *fakeOwner {
		return &fakeOwner{commitStatus: kvringv1.CommitStatus_COMMIT_STATUS_FAILED, commitCode: transfer.WireCode(store.ErrRejected)}
	}
	r := runFake(t, fakeWrite(t, []byte("x"), 2, 1, map[string]*fakeOwner{"a": rejecting(), "b": rejecting()}))
	if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_REJECTED || len(r.GetHolders()) != 0 {
		t.Fatalf("every owner rejects: %+v", r)
	}
	r = runFake(t, fakeWrite(t, []byte("x"), 2, 1, map[string]*fakeOwner{"a": rejecting(), "b": {commitErr: errors.New("lost")}}))
	if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_FAILED || len(r.GetHolders()) != 0 {
		t.Fatalf("one rejects, one fails: %+v", r)
	}
}

// TestAFailedCommitAbortsWhatTheOwnerStaged: an owner whose commit call
// fails is told to abort the tokens it voted (it may never have seen the
// commit), and the chunk is not reported held by it.
func TestAFailedCommitAbortsWhatTheOwnerStaged(t *testing.T) {
	t.Parallel()
	a := &fakeOwner{commitErr: errors.New("deadline exceeded")}
	r := runFake(t, fakeWrite(t, []byte("abc"), 1, 1, map[string]*fakeOwner{"a": a}))
	if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_FAILED || len(r.GetHolders()) != 0 {
		t.Fatalf("result: %+v", r)
	}
	if !slices.Equal(a.aborted, []uint64{100}) {
		t.Fatalf("aborted %v, want the voted token 100", a.aborted)
	}
}

// TestVotesThatCameWithAnErrorAreAbortedNotCommitted: an owner whose votes
// arrived but whose prepare then failed (late past the timeout) has its
// ready tokens aborted and none committed.
func TestVotesThatCameWithAnErrorAreAbortedNotCommitted(t *testing.T) {
	t.Parallel()
	a := &fakeOwner{finishErr: context.DeadlineExceeded, commitStatus: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}
	b := sealing()
	r := runFake(t, fakeWrite(t, []byte("abc"), 2, 1, map[string]*fakeOwner{"a": a, "b": b}))
	if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || len(r.GetHolders()) != 1 || r.GetHolders()[0].GetNodeId() != "b" {
		t.Fatalf("result: %+v, want stored on b alone", r)
	}
	if len(a.committed) != 0 || !slices.Equal(a.aborted, []uint64{100}) {
		t.Fatalf("owner a: committed %v, aborted %v; want none committed, 100 aborted", a.committed, a.aborted)
	}
	if !a.closed || !b.closed {
		t.Fatal("a session was left open")
	}
}

// TestAChunkWithoutOwnersFails: a chunk no member takes (every one
// drains) fails, with the reason.
func TestAChunkWithoutOwnersFails(t *testing.T) {
	t.Parallel()
	r := runFake(t, fakeWrite(t, []byte("abc"), 1, 1, nil))
	if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_FAILED || !strings.Contains(r.GetReason(), "draining") {
		t.Fatalf("result: %+v", r)
	}
}

// TestAnUnreachableOwnerFailsOnlyItsShare: an owner whose session cannot
// be opened fails the chunk there with the cause's code; the other owner
// stores it.
func TestAnUnreachableOwnerFailsOnlyItsShare(t *testing.T) {
	t.Parallel()
	tx := fakeWrite(t, []byte("abc"), 2, 1, map[string]*fakeOwner{"a": sealing()})
	tx.addTo("gone", ring.Member{ID: "gone", Addr: "gone:1"}, 0, tx.chunks[0])
	r := runFake(t, tx)
	if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || !r.GetDegraded() || !strings.Contains(r.GetReason(), "node gone") {
		t.Fatalf("result: %+v", r)
	}
}

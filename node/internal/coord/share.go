package coord

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// ownerShare is one owner's share of a put: the chunks it owns, what it
// said about each, and the session that carries them. Positions in the share
// ("share index") differ from positions in the engine's batch ("batch
// index"); toBatch and toShare map between them. Each share is touched by one
// goroutine at a time (the phases run the shares in parallel, one goroutine
// each).
type ownerShare struct {
	member  ring.Member
	remote  bool // member is a peer, not this node
	sess    putSession
	toBatch []uint32          // share index → batch index
	toShare map[uint32]uint32 // batch index → share index
	chunks  []*kvringv1.ChunkRef
	need    map[uint32]bool // share indexes whose bytes the owner wants
	votes   map[uint32]*kvringv1.ChunkVote
	sent    map[uint32]uint64 // bytes forwarded per share index
	sealed  map[uint32]bool
	tokens  map[uint32]uint64 // stage tokens of the chunks voted ready
	// inPlace are the share indexes whose slot this node's owner was given
	// complete (a publish's blob): no frames are sent for them.
	inPlace map[uint32]bool
	failed  error             // the owner became unreachable or broke the protocol
	cause   error             // failed's cause, unwrapped
	holder  *kvringv1.NodeRef // the member as a result's holder (holderRef)
	// life is the lifetime of the owner's sessions: cut (by the suspect
	// watch, from any goroutine) ends whatever the session is waiting for.
	life context.Context
	cut  context.CancelCauseFunc
}

// holderRef is the member as a chunk result's holder, one message for every
// chunk of the share (results are only encoded, never changed).
func (s *ownerShare) holderRef() *kvringv1.NodeRef {
	if s.holder == nil {
		s.holder = &kvringv1.NodeRef{NodeId: s.member.ID, GrpcAddr: s.member.Addr}
	}
	return s.holder
}

// newOwnerShare returns member m's empty share; its life ends with cut
// (closeSessions cuts it when the write ends).
func newOwnerShare(m ring.Member, self string) *ownerShare {
	life, cut := context.WithCancelCause(context.Background())
	return &ownerShare{member: m, remote: m.ID != self, toShare: map[uint32]uint32{}, need: map[uint32]bool{},
		votes: map[uint32]*kvringv1.ChunkVote{}, sent: map[uint32]uint64{}, sealed: map[uint32]bool{}, tokens: map[uint32]uint64{},
		inPlace: map[uint32]bool{}, life: life, cut: cut}
}

// add appends the chunk at batch index i to the share.
func (s *ownerShare) add(i uint32, ch *kvringv1.ChunkRef) {
	s.toShare[i] = uint32(len(s.toBatch))
	s.toBatch = append(s.toBatch, i)
	s.chunks = append(s.chunks, ch)
}

// fail records the first failure of the owner; later ones are ignored. A
// session cut because gossip suspects the owner fails with errSuspect,
// whatever error the cut surfaced as.
func (s *ownerShare) fail(err error) {
	if s.cutBySuspicion() {
		err = errSuspect
	}
	if s.failed == nil {
		s.failed = fmt.Errorf("node %s (%s): %w", s.member.ID, s.member.Addr, err)
		s.cause = err
	}
}

// vote is what the owner said about the chunk at batch index i (nil: nothing).
func (s *ownerShare) vote(i uint32) *kvringv1.ChunkVote { return s.votes[s.toShare[i]] }

// fanoutSink forwards one batch chunk's bytes to every owner that needs
// them, turning the bytes back into frames with the owner's share index.
type fanoutSink struct {
	index  uint32 // batch index
	shares []*ownerShare
	sent   prometheus.Counter // bytes forwarded to peers
	gate   *sinkGate          // closed when the put is abandoned
}

func (s *fanoutSink) Write(b []byte) (int, error) { return s.WriteBuffers([][]byte{b}) }

// WriteBuffers forwards one frame, in pieces, to every owner that has not
// failed. An owner's failure fails only its share; the frame counts as taken.
func (s *fanoutSink) WriteBuffers(bufs [][]byte) (int, error) {
	if !s.gate.enter() {
		return 0, errIdleStream
	}
	defer s.gate.exit()
	f := transfer.Frame{Data: bufs}
	n := f.Len()
	for _, sh := range s.shares {
		if sh.failed != nil {
			continue
		}
		si := sh.toShare[s.index]
		f.Index, f.Offset = si, sh.sent[si]
		if err := sh.sess.send(f); err != nil {
			sh.fail(err)
			continue
		}
		sh.sent[si] += uint64(n)
		if sh.remote {
			s.sent.Add(float64(n))
		}
	}
	return n, nil
}

// writeChunk forwards a whole chunk's bytes, in frames of at most
// MaxFrameBytes.
func (s *fanoutSink) writeChunk(b []byte) {
	for off := 0; off < len(b); off += transfer.MaxFrameBytes {
		_, _ = s.WriteBuffers([][]byte{b[off:min(off+transfer.MaxFrameBytes, len(b))]})
	}
}

// wantsBytes reports whether a share the sink feeds needs frames: a
// peer's, or this node's when the chunk's slot was not given complete.
func (s *fanoutSink) wantsBytes() bool {
	for _, sh := range s.shares {
		if !sh.inPlace[sh.toShare[s.index]] {
			return true
		}
	}
	return false
}

// parallel runs f for every item at once and waits: one goroutine per owner
// (or per node asked), each touching only its own item. A single item (one
// node, or a batch all on one owner) runs on the caller's goroutine: a
// goroutine and a wake-up less per phase.
func parallel[T any](items map[string]T, f func(T)) {
	if len(items) == 1 {
		for _, it := range items {
			f(it)
		}
		return
	}
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { f(it) })
	}
	wg.Wait()
}

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// putPlan is one owner's share of a batch.
type putPlan struct {
	m      ring.Member
	remote bool // m is a peer, not this node
	sess   putSession
	global []uint32          // owner index → batch index
	local  map[uint32]uint32 // batch index → owner index
	chunks []*kvringv1.ChunkRef
	need   map[uint32]bool // owner indexes whose bytes the owner wants
	votes  map[uint32]*kvringv1.ChunkVote
	sent   map[uint32]uint64 // bytes forwarded per owner index
	sealed map[uint32]bool
	failed error // the owner became unreachable or broke the protocol
	cause  error // failed's cause, unwrapped
	tokens map[uint32]uint64
}

func (p *putPlan) fail(err error) {
	if p.failed == nil {
		p.failed = fmt.Errorf("node %s (%s): %w", p.m.ID, p.m.Addr, err)
		p.cause = err
	}
}

// fanoutSink forwards one batch chunk's bytes to every owner that needs
// them, turning the bytes back into frames with the owner's index.
type fanoutSink struct {
	idx   uint32
	plans []*putPlan
	sent  prometheus.Counter // bytes forwarded to peers
}

func (s *fanoutSink) Write(b []byte) (int, error) { return s.WriteBuffers([][]byte{b}) }

// WriteBuffers forwards one frame, in pieces, to every owner that has not
// failed. An owner's failure fails only its share; the frame counts as taken.
func (s *fanoutSink) WriteBuffers(bufs [][]byte) (int, error) {
	f := transfer.Frame{Data: bufs}
	n := f.Len()
	for _, p := range s.plans {
		if p.failed != nil {
			continue
		}
		li := p.local[s.idx]
		f.Index, f.Offset = li, p.sent[li]
		if err := p.sess.send(f); err != nil {
			p.fail(err)
			continue
		}
		p.sent[li] += uint64(n)
		if p.remote {
			s.sent.Add(float64(n))
		}
	}
	return n, nil
}

// put runs one engine Put stream: begin, need, data, end, result. Bad input
// ends the call with InvalidArgument; an unknown namespace or a schema
// mismatch with FailedPrecondition; everything about a chunk's fate is in its
// result.
func (c *coordinator) put(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	defer observeSince(c.m.putSeconds, time.Now())
	ctx := stream.Context()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return transfer.ToStatus(fmt.Errorf("%w: put stream ended before its begin message", transfer.ErrInvalidArgument))
	}
	if err != nil {
		return transfer.ToStatus(err)
	}
	begin := first.GetBegin()
	if begin == nil {
		return transfer.ToStatus(fmt.Errorf("%w: the first put message must be begin", transfer.ErrInvalidArgument))
	}
	_, rec, err := c.reg.resolve(begin.GetNamespace())
	if err != nil {
		return transfer.ToStatus(err)
	}
	ref := &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()}
	ids, err := validateChunks(begin.GetChunks(), c.local.maxChunk, c.maxBatch)
	if err != nil {
		return transfer.ToStatus(err)
	}
	rg, err := c.currentRing()
	if err != nil {
		return transfer.ToStatus(err)
	}
	replicas := int(max(1, rec.GetReplicationFactor()))
	minReplicas := int(max(1, rec.GetMinReplicas()))

	// Place every chunk and open one session per owner.
	plans := map[string]*putPlan{}
	chunkOwners := make([][]*putPlan, len(ids))
	for i, id := range ids {
		for _, m := range rg.Owners(rec.GetName(), id[:], replicas) {
			p := plans[m.ID]
			if p == nil {
				p = &putPlan{m: m, remote: m.ID != c.self, local: map[uint32]uint32{}, need: map[uint32]bool{}, votes: map[uint32]*kvringv1.ChunkVote{},
					sent: map[uint32]uint64{}, sealed: map[uint32]bool{}, tokens: map[uint32]uint64{}}
				plans[m.ID] = p
			}
			p.local[uint32(i)] = uint32(len(p.global))
			p.global = append(p.global, uint32(i))
			p.chunks = append(p.chunks, begin.GetChunks()[i])
			chunkOwners[i] = append(chunkOwners[i], p)
		}
	}
	defer func() {
		for _, p := range plans {
			if p.sess != nil {
				p.sess.close()
			}
		}
	}()

	// Prepare, phase 1: every owner stages and says what it needs.
	parallel(plans, func(p *putPlan) {
		sess, err := c.session(p.m)
		if err != nil {
			p.fail(err)
			return
		}
		p.sess = sess
		need, votes, err := sess.begin(ctx, ref, p.chunks)
		if err != nil {
			p.fail(transfer.FromStatus(err))
			return
		}
		for _, n := range need {
			if int(n) >= len(p.chunks) {
				p.fail(fmt.Errorf("asked for chunk %d of %d", n, len(p.chunks)))
				return
			}
			p.need[n] = true
		}
		for _, v := range votes {
			if int(v.GetIndex()) < len(p.chunks) {
				p.votes[v.GetIndex()] = v
			}
		}
	})

	// Tell the engine which chunks to send; answer the others now.
	var need []uint32
	needed := map[uint32]bool{}
	var settled []*kvringv1.PutChunkResult
	var deferred []uint32 // chunks another writer was staging on some owner
	sinks := map[uint32]*fanoutSink{}
	for i := range ids {
		idx := uint32(i)
		var to []*putPlan
		for _, p := range chunkOwners[i] {
			if p.failed == nil && p.need[p.local[idx]] {
				to = append(to, p)
			}
		}
		if len(to) == 0 {
			if slices.ContainsFunc(chunkOwners[i], func(p *putPlan) bool { return p.failed == nil && isBusy(p.votes[p.local[idx]]) }) {
				deferred = append(deferred, idx) // answered after awaitOtherWriters
				continue
			}
			settled = append(settled, c.result(idx, chunkOwners[i], replicas, minReplicas))
			continue
		}
		need = append(need, idx)
		needed[idx] = true
		sinks[idx] = &fanoutSink{idx: idx, plans: to, sent: c.m.peerSent}
	}
	if err := stream.Send(&kvringv1.PutResponse{Epoch: rg.Epoch(), Msg: &kvringv1.PutResponse_Need{
		Need: &kvringv1.PutNeed{Need: need, Settled: settled}}}); err != nil {
		return err
	}
	c.countPut(settled, begin.GetChunks())

	// Data: frames from the engine, forwarded to the owners that need them.
	asm := transfer.NewAssembler(begin.GetChunks(), needed)
	for idx, s := range sinks {
		asm.SetSink(idx, s)
	}
	if len(need) > 0 {
		if err := c.receiveFrames(stream, asm); err != nil {
			c.abortAll(plans)
			return transfer.ToStatus(err)
		}
	} else if err := drainPut(stream); err != nil {
		return transfer.ToStatus(err)
	}

	// Prepare, phase 2: votes. Commit what every owner voted ready.
	parallel(plans, func(p *putPlan) {
		if p.failed != nil || len(p.need) == 0 {
			return
		}
		votes, err := p.sess.finish()
		if err != nil {
			p.fail(transfer.FromStatus(err))
			return
		}
		for _, v := range votes {
			if !p.need[v.GetIndex()] {
				continue // a vote for a chunk this owner was not sent: ignore
			}
			p.votes[v.GetIndex()] = v
			if v.GetVote() == kvringv1.Vote_VOTE_READY {
				p.tokens[v.GetIndex()] = v.GetStageToken()
			}
		}
	})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.commitTimeout)
	defer cancel()
	parallel(plans, func(p *putPlan) {
		if p.failed != nil || len(p.tokens) == 0 {
			return
		}
		var order []uint32
		var req []*kvringv1.StagedChunk
		for li, tok := range p.tokens {
			order = append(order, li)
			req = append(req, &kvringv1.StagedChunk{StageToken: tok, Id: p.chunks[li].GetId()})
		}
		res, err := p.sess.commit(cctx, ref, req)
		if err != nil {
			p.fail(err)
			return
		}
		for k, r := range res {
			li := order[k]
			switch {
			case r.GetStatus() == kvringv1.CommitStatus_COMMIT_STATUS_SEALED:
				p.sealed[li] = true
			case codes.Code(r.GetCode()) == codes.ResourceExhausted:
				// The owner's policy or budget declined the chunk at the seal.
				p.votes[li] = &kvringv1.ChunkVote{Index: li, Vote: kvringv1.Vote_VOTE_REJECTED, Reason: r.GetReason()}
			default:
				p.votes[li] = &kvringv1.ChunkVote{Index: li, Vote: kvringv1.Vote_VOTE_FAILED, Reason: "commit failed: " + r.GetReason()}
			}
		}
	})

	for _, p := range plans {
		if p.remote && (p.sess != nil || p.cause != nil) {
			c.peers.note(ctx, p.m, p.cause)
		}
	}
	c.awaitOtherWriters(ctx, ref, plans)
	results := make([]*kvringv1.PutChunkResult, 0, len(need)+len(deferred))
	for _, idx := range slices.Concat(need, deferred) {
		results = append(results, c.result(idx, chunkOwners[idx], replicas, minReplicas))
	}
	c.countPut(results, begin.GetChunks())
	return stream.Send(&kvringv1.PutResponse{Epoch: c.epoch(), Msg: &kvringv1.PutResponse_Result{
		Result: &kvringv1.PutResult{Results: results}}})
}

// receiveFrames reads data frames until end or half-close. A stream that
// ends with chunks still short is bad input. Frame bytes are not copied out
// of gRPC's receive buffers: each frame goes to its sink and is released.
func (c *coordinator) receiveFrames(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse], asm *transfer.Assembler) error {
	in := transfer.InFrame{Msg: new(kvringv1.PutRequest), Field: transfer.PutDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		if errors.Is(err, io.EOF) || (err == nil && in.Msg.(*kvringv1.PutRequest).GetEnd() != nil) {
			if missing := asm.Missing(); len(missing) > 0 {
				return fmt.Errorf("%w: the put stream ended before the bytes of chunks %v were complete", transfer.ErrIncompleteStream, missing)
			}
			return nil
		}
		if err != nil {
			return err
		}
		f, ok := in.Frame()
		if !ok {
			return fmt.Errorf("%w: a second begin in one put stream", transfer.ErrInvalidArgument)
		}
		_, err = asm.AddFrame(f)
		in.Release()
		if err != nil {
			return err
		}
	}
}

// drainPut waits for the engine's end when no bytes are needed. Frames for
// chunks nobody needs are ignored, without being copied.
func drainPut(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	in := transfer.InFrame{Msg: new(kvringv1.PutRequest), Field: transfer.PutDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		in.Release()
		if errors.Is(err, io.EOF) || (err == nil && in.Msg.(*kvringv1.PutRequest).GetEnd() != nil) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// abortAll frees what the owners staged for a batch that is given up.
func (c *coordinator) abortAll(plans map[string]*putPlan) {
	ctx, cancel := context.WithTimeout(context.Background(), c.commitTimeout)
	defer cancel()
	parallel(plans, func(p *putPlan) {
		if p.sess != nil {
			p.sess.close()
			var toks []uint64
			for _, t := range p.tokens {
				toks = append(toks, t)
			}
			p.sess.abort(ctx, toks)
		}
	})
}

// result decides a chunk's fate from its owners' votes and commits. Stored
// means held by at least minReplicas nodes (degraded below the replication
// factor); no holder means rejected (every owner's policy or budget declined)
// or failed (with every owner's reason).
func (c *coordinator) result(idx uint32, owners []*putPlan, replicas, minReplicas int) *kvringv1.PutChunkResult {
	r := &kvringv1.PutChunkResult{Index: idx}
	var reasons []string
	newly, allRejected := false, true
	for _, p := range owners {
		if p.failed != nil {
			reasons = append(reasons, p.failed.Error())
			allRejected = false
			continue
		}
		li := p.local[idx]
		holder := &kvringv1.NodeRef{NodeId: p.m.ID, GrpcAddr: p.m.Addr}
		if p.sealed[li] {
			r.Holders = append(r.Holders, holder)
			newly = true
			continue
		}
		v := p.votes[li]
		switch v.GetVote() {
		case kvringv1.Vote_VOTE_ALREADY_HELD:
			r.Holders = append(r.Holders, holder)
		case kvringv1.Vote_VOTE_REJECTED:
			reasons = append(reasons, fmt.Sprintf("node %s: %s", p.m.ID, v.GetReason()))
		case kvringv1.Vote_VOTE_READY:
			reasons = append(reasons, fmt.Sprintf("node %s: voted ready but was not committed", p.m.ID))
			allRejected = false
		default:
			reason := v.GetReason()
			if v == nil {
				reason = "no vote"
			}
			reasons = append(reasons, fmt.Sprintf("node %s: %s", p.m.ID, reason))
			allRejected = false
		}
	}
	switch {
	case len(r.Holders) >= minReplicas:
		r.Status = kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD
		if newly {
			r.Status = kvringv1.PutStatus_PUT_STATUS_STORED
		}
		r.Degraded = len(r.Holders) < replicas
		if r.Degraded {
			r.Reason = strings.Join(reasons, "; ")
		}
	case len(r.Holders) == 0 && allRejected:
		r.Status = kvringv1.PutStatus_PUT_STATUS_REJECTED
		r.Reason = strings.Join(reasons, "; ")
	default:
		r.Status = kvringv1.PutStatus_PUT_STATUS_FAILED
		if len(r.Holders) > 0 {
			reasons = append([]string{fmt.Sprintf("held by %d of the %d required replicas", len(r.Holders), minReplicas)}, reasons...)
		}
		r.Reason = strings.Join(reasons, "; ")
	}
	return r
}

// countPut counts the chunk results the engine is sent.
func (c *coordinator) countPut(results []*kvringv1.PutChunkResult, chunks []*kvringv1.ChunkRef) {
	for _, r := range results {
		var label string
		switch r.GetStatus() {
		case kvringv1.PutStatus_PUT_STATUS_STORED:
			label = putStored
		case kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD:
			label = putAlreadyHeld
		case kvringv1.PutStatus_PUT_STATUS_REJECTED:
			label = putRejected
		default:
			label = putFailed
		}
		by := c.m.putBy[label]
		by[0].Inc()
		if i := int(r.GetIndex()); i < len(chunks) {
			by[1].Add(float64(chunks[i].GetSize()))
		}
		if r.GetDegraded() {
			c.m.putDegraded.Inc()
		}
	}
}

// parallel runs f for every plan at once and waits.
func parallel[T any](items map[string]T, f func(T)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(it)
		}()
	}
	wg.Wait()
}

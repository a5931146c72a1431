package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/kvring/kvring/internal/crc32c"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Chunk is one chunk to store. Data is only read, and only during Put: gRPC
// sends it from where it lies, without a copy, and Put returns only once gRPC
// no longer reads it (see lentTimeout for the exception, on failed puts).
type Chunk struct {
	ID   ChunkID
	Data []byte
	// Group is the chunk's group key: the id of the first chunk of its
	// placement group in its prompt (GroupKeys computes it). Required when
	// the namespace's ChunksPerGroup is above 1; ignored otherwise.
	Group ChunkID
}

// PutStatus is a chunk's fate.
type PutStatus int

const (
	// Stored: at least min_replicas nodes hold the chunk now (Holders).
	Stored PutStatus = iota + 1
	// AlreadyHeld: the cluster held it before; no bytes moved.
	AlreadyHeld
	// Rejected: no node holds it because the owners' admission policy or
	// memory budget declined it. Not an error of the system.
	Rejected
	// Failed: no node (or fewer than min_replicas) holds it; Reason says why.
	Failed
)

func (s PutStatus) String() string {
	switch s {
	case Stored:
		return "stored"
	case AlreadyHeld:
		return "already_held"
	case Rejected:
		return "rejected"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("PutStatus(%d)", int(s))
}

// Held reports whether the chunk is held by the cluster after the put.
func (s PutStatus) Held() bool { return s == Stored || s == AlreadyHeld }

// Node names a kvring node.
type Node struct {
	ID   string
	Addr string
}

// PutResult is the cluster's answer for one chunk.
type PutResult struct {
	ID       ChunkID
	Status   PutStatus
	Holders  []Node
	Degraded bool // held by fewer nodes than the replication factor
	Reason   string
	code     uint32 // PutChunkResult.code: the gRPC code that classifies a failure
}

// Put stores chunks with a two-phase confirmed write and returns one result
// per chunk, in order. The error is non-nil only when the call as a whole
// failed (not connected, bad input, schema mismatch, deadline); then nothing
// is reported stored.
func (c *Client) Put(ctx context.Context, chunks []Chunk) ([]PutResult, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cc, err := c.conn.ready(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := c.chunkKeys(chunks)
	if err != nil {
		return nil, err
	}
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	slab := make([]kvringv1.ChunkRef, len(chunks)) // one allocation for the batch's refs, not one each
	for i, ch := range chunks {
		r := &slab[i]
		r.Id, r.Size, r.Crc32C = ch.ID[:], uint64(len(ch.Data)), crc32c.Checksum(ch.Data)
		refs[i] = r
	}
	var results []PutResult
	err = c.retryUnregistered(ctx, cc, true, func(ref *kvringv1.NamespaceRef) error {
		var err error
		if results, err = c.putRouted(ctx, cc, ref, chunks, refs, keys); err != nil {
			return err
		}
		c.resendBusy(ctx, cc, ref, chunks, refs, keys, results)
		return nil
	})
	return results, err
}

// resendBusy puts once more the chunks whose result is failed because
// another write of the chunk was under way on an owner and ended without
// storing it or did not end in time (code ABORTED: typically this client's
// own earlier attempt, given up on an owner that answered late, whose abort
// reached the owners after this put asked). Their new results replace the
// old ones; a resend that fails as a whole leaves them as they were.
func (c *Client) resendBusy(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, chunks []Chunk,
	refs []*kvringv1.ChunkRef, keys [][]byte, results []PutResult) {
	var idx []int
	for i, r := range results {
		if r.Status == Failed && codes.Code(r.code) == codes.Aborted {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 || ctx.Err() != nil {
		return
	}
	sub := make([]Chunk, len(idx))
	subRefs := make([]*kvringv1.ChunkRef, len(idx))
	var subKeys [][]byte
	if keys != nil {
		subKeys = make([][]byte, len(idx))
	}
	for k, i := range idx {
		sub[k], subRefs[k] = chunks[i], refs[i]
		if keys != nil {
			subKeys[k] = keys[i]
		}
	}
	again, err := c.putRouted(ctx, cc, ref, sub, subRefs, subKeys)
	if err != nil || len(again) != len(idx) {
		return
	}
	for k, i := range idx {
		results[i] = again[k]
	}
}

// put writes chunks over cc in one Put stream: begin, the bytes the node
// needs (or all of them, eager), end, and the result of every chunk.
func (c *Client) put(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, chunks []Chunk, refs []*kvringv1.ChunkRef, keys [][]byte) ([]PutResult, error) {
	// Frames borrow the chunks' bytes (no copy). gRPC writes them after Send
	// returns, so put does not return while gRPC still holds any: after a
	// result that is at once; after a failure, once gRPC has dropped the
	// canceled stream's queued frames (cancel runs first: defers run last in,
	// first out).
	var lent transfer.Lender
	defer c.awaitLent(&lent, cc)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := kvringv1.NewCacheClient(cc).Put(sctx)
	if err != nil {
		return nil, c.callErr(cc, "put", err)
	}
	fail := func(err error) ([]PutResult, error) {
		if _, rerr := stream.Recv(); rerr != nil {
			err = rerr // the server's status explains a broken send
		}
		return nil, c.callErr(cc, "put", err)
	}
	eager := c.eager(chunks)
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{
		Namespace: ref, Chunks: refs, Groups: groupRuns(keys), Eager: eager}}}); err != nil {
		return fail(err)
	}
	need, err := c.putNeed(cc, stream, len(chunks), eager)
	if err != nil {
		return nil, err
	}
	out := newPutResults(chunks)
	out.take(need.GetSettled())
	if err := sendNeeded(stream, chunks, need.GetNeed(), &lent); err != nil {
		if errors.Is(err, errBadNeed) {
			return nil, err
		}
		return fail(err)
	}
	if err := c.putResult(cc, stream, eager, out); err != nil {
		return nil, err
	}
	return out.final(), nil
}

// putNeed is the node's answer to begin: which chunks' bytes it needs
// (every chunk's, unasked, for an eager put).
func (c *Client) putNeed(cc *grpc.ClientConn, stream kvringv1.Cache_PutClient, n int, eager bool) (*kvringv1.PutNeed, error) {
	if eager {
		need := &kvringv1.PutNeed{Need: make([]uint32, n)} // every chunk's bytes, unasked
		for i := range need.Need {
			need.Need[i] = uint32(i)
		}
		return need, nil
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, c.callErr(cc, "put", err)
	}
	c.route.observe(cc.Target(), m.GetEpoch())
	need := m.GetNeed()
	if need == nil {
		return nil, fmt.Errorf("kvring put: the node answered without saying which chunks it needs")
	}
	return need, nil
}

// errBadNeed marks a need message that names a chunk the batch lacks.
var errBadNeed = errors.New("kvring put: the node asked for a chunk the batch does not have")

// sendNeeded sends the bytes of the chunks at need, in frames that borrow
// them (lent), then the end of the stream.
func sendNeeded(stream kvringv1.Cache_PutClient, chunks []Chunk, need []uint32, lent *transfer.Lender) error {
	// One frame value for the whole put: SendMsg encodes it before it
	// returns, keeping the chunk's bytes (lent) but not the frame.
	piece := [][]byte{nil}
	frame := transfer.OutFrame{Field: transfer.PutDataField, Data: piece, Borrow: true, Lender: lent}
	for _, idx := range need {
		if int(idx) >= len(chunks) {
			return fmt.Errorf("%w: chunk %d of %d", errBadNeed, idx, len(chunks))
		}
		data := chunks[idx].Data
		for off := 0; off < len(data); off += transfer.MaxFrameBytes {
			end := min(off+transfer.MaxFrameBytes, len(data))
			frame.Index, frame.Offset, piece[0] = idx, uint64(off), data[off:end:end]
			if err := stream.SendMsg(&frame); err != nil {
				return err
			}
		}
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		return err
	}
	return stream.CloseSend()
}

// putResult reads the node's result into out. The node always ends with a
// result (empty when nothing was needed); a node that predates eager puts
// sends its need first, unasked for.
func (c *Client) putResult(cc *grpc.ClientConn, stream kvringv1.Cache_PutClient, eager bool, out *putResults) error {
	m, err := stream.Recv()
	if err == nil && eager && m.GetNeed() != nil {
		out.take(m.GetNeed().GetSettled())
		m, err = stream.Recv()
	}
	if err != nil {
		return c.callErr(cc, "put", err)
	}
	c.route.observe(cc.Target(), m.GetEpoch())
	out.take(m.GetResult().GetResults())
	return nil
}

// putResults gathers the results of a put's chunks as the node sends them.
type putResults struct {
	out  []PutResult
	seen []bool
}

func newPutResults(chunks []Chunk) *putResults {
	r := &putResults{out: make([]PutResult, len(chunks)), seen: make([]bool, len(chunks))}
	for i := range r.out {
		r.out[i].ID = chunks[i].ID
	}
	return r
}

// take records chunk results (one for an index beyond the batch is ignored).
// The results' holders share one allocation.
func (p *putResults) take(results []*kvringv1.PutChunkResult) {
	n := 0
	for _, r := range results {
		n += len(r.GetHolders())
	}
	holders := make([]Node, 0, n)
	for _, r := range results {
		i := int(r.GetIndex())
		if i >= len(p.out) {
			continue
		}
		p.seen[i] = true
		o := &p.out[i]
		o.Status = PutStatus(r.GetStatus())
		o.Degraded = r.GetDegraded()
		o.Reason = r.GetReason()
		o.code = r.GetCode()
		start := len(holders)
		for _, h := range r.GetHolders() {
			holders = append(holders, Node{ID: h.GetNodeId(), Addr: h.GetGrpcAddr()})
		}
		switch got := holders[start:len(holders):len(holders)]; {
		case len(got) == 0:
		case o.Holders == nil:
			o.Holders = got
		default: // a second result for the chunk
			o.Holders = append(o.Holders, got...)
		}
	}
}

// final returns the results, a chunk the node sent no valid result for
// failed.
func (p *putResults) final() []PutResult {
	for i, ok := range p.seen {
		if !ok || p.out[i].Status < Stored || p.out[i].Status > Failed {
			p.out[i].Status, p.out[i].Holders = Failed, nil
			p.out[i].Reason = "the node sent no result for this chunk"
		}
	}
	return p.out
}

// eager reports whether a put of chunks sends their bytes without waiting
// for the node to say which it needs (one round trip instead of two): when
// they add up to at most Config.EagerPutBytes. Bytes of chunks the cluster
// already holds then cross the network for nothing, so large batches, where
// that costs more than a round trip, keep the need exchange.
func (c *Client) eager(chunks []Chunk) bool {
	limit := c.cfg.EagerPutBytes
	if limit < 0 {
		return false
	}
	total := 0
	for _, ch := range chunks {
		total += len(ch.Data)
		if total > limit {
			return false
		}
	}
	return true
}

// lentTimeout bounds how long put waits for gRPC to let go of a failed
// stream's borrowed frames. gRPC drops them as soon as its writer gets to the
// canceled stream, normally well within a millisecond. Two cases outlast it:
// gRPC forgets to hand back a frame sent just as the stream ended (grpc-go
// v1.85 drops such a frame without freeing it: loopyWriter.preprocessData),
// which it will then never read; and a write blocked on a node that stopped
// reading its socket, which may still copy the rest of one 16 KiB HTTP/2
// frame when it unblocks. Put does not wait longer for either.
const lentTimeout = time.Second

// awaitLent waits until gRPC holds none of the chunk bytes a put lent it, at
// most lentTimeout (see there). Bytes gRPC still held then and changed by
// the caller could only go out on the canceled stream; they can never be
// stored, since each chunk's checksum is declared before its bytes move and
// the owner checks it.
func (c *Client) awaitLent(l *transfer.Lender, cc *grpc.ClientConn) {
	if l.Outstanding() == 0 || l.Wait(lentTimeout) {
		return
	}
	c.cfg.Logger.Debug("kvring put: gRPC did not hand back every chunk frame of a failed put; returning",
		"node", cc.Target(), "frames", l.Outstanding(), "waited", lentTimeout)
}

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// owner is this node's side of the Peer service: it stages, seals, pins and
// serves chunks of its local store on behalf of coordinators (itself
// included, in process). Safe for concurrent use.
type owner struct {
	st       *store.Store
	log      *slog.Logger
	reg      *registry
	epoch    func() uint64
	maxChunk int64
	maxBatch int
	lease    time.Duration // stage lease: how long a READY vote waits for Commit
	maxPin   time.Duration // longest pin a lookup lease may hold
	now      func() time.Time

	mu        sync.Mutex
	nextToken uint64
	staged    map[uint64]stagedChunk
	pins      map[uint64]leasePins // coordinator lease id → local pins
}

type stagedChunk struct {
	w       *store.Staged
	id      store.ID
	ns      string
	expires time.Time
}

type leasePins struct {
	pins    []store.PinID
	expires time.Time
}

func newOwner(st *store.Store, log *slog.Logger, reg *registry, epoch func() uint64, maxBatch int, lease, maxPin time.Duration, now func() time.Time) *owner {
	// Tokens start at a random point so a token from before a restart never
	// names a chunk staged after it.
	return &owner{st: st, log: log, reg: reg, epoch: epoch, maxChunk: st.MaxChunkSize(), maxBatch: maxBatch, lease: lease, maxPin: maxPin,
		now: now, nextToken: newLeaseID() >> 1, staged: make(map[uint64]stagedChunk), pins: make(map[uint64]leasePins)}
}

// register keeps a READY chunk until Commit or Abort and returns its token.
func (o *owner) register(ns string, id store.ID, w *store.Staged) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nextToken++
	o.staged[o.nextToken] = stagedChunk{w: w, id: id, ns: ns, expires: o.now().Add(o.lease)}
	return o.nextToken
}

// newPrepare starts the prepare phase of a batch on this node.
func (o *owner) newPrepare(ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef) (*prepareState, []uint32, []*kvringv1.ChunkVote, error) {
	if ref == nil || ref.GetName() == "" {
		return nil, nil, nil, fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument)
	}
	ids, err := validateChunks(chunks, o.maxChunk, o.maxBatch)
	if err != nil {
		return nil, nil, nil, err
	}
	ns := storeNamespace(ref.GetName(), ref.GetFingerprint())
	p := &prepareState{st: o.st}
	need, votes := p.begin(ns, chunks, ids)
	return p, need, votes, nil
}

// endPrepare votes on the needed chunks, registering the READY ones.
func (o *owner) endPrepare(p *prepareState) []*kvringv1.ChunkVote {
	votes := make([]*kvringv1.ChunkVote, 0, len(p.staged))
	for idx, w := range p.staged {
		if err := w.Check(); err != nil {
			w.Abort()
			votes = append(votes, voteFor(idx, err))
			continue
		}
		tok := o.register(p.ns, p.ids[idx], w)
		votes = append(votes, &kvringv1.ChunkVote{Index: idx, Vote: kvringv1.Vote_VOTE_READY, StageToken: tok})
	}
	p.staged = nil
	p.done = true
	return votes
}

// commit seals the chunks of the given tokens. A token already committed (a
// retry) reports sealed when the chunk is held.
func (o *owner) commit(ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) []*kvringv1.CommitResult {
	res := make([]*kvringv1.CommitResult, len(chunks))
	sealed := false
	for i, c := range chunks {
		o.mu.Lock()
		sc, ok := o.staged[c.GetStageToken()]
		delete(o.staged, c.GetStageToken())
		o.mu.Unlock()
		id, idErr := store.ParseID(c.GetId())
		if ok && (idErr != nil || ref == nil || sc.id != id || sc.ns != storeNamespace(ref.GetName(), ref.GetFingerprint())) {
			// The token names another chunk: never seal what was not asked for.
			o.mu.Lock()
			o.staged[c.GetStageToken()] = sc
			o.mu.Unlock()
			res[i] = &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_FAILED, Code: uint32(codes.InvalidArgument),
				Reason: fmt.Sprintf("stage token %d does not belong to chunk %x of this namespace", c.GetStageToken(), c.GetId())}
			continue
		}
		if !ok {
			if idErr == nil && ref != nil && o.st.Contains(storeNamespace(ref.GetName(), ref.GetFingerprint()), id) {
				res[i] = &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}
				continue
			}
			res[i] = &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_FAILED,
				Reason: fmt.Sprintf("unknown stage token %d (its lease expired or it was aborted)", c.GetStageToken())}
			continue
		}
		err := sc.w.Seal()
		switch {
		case err == nil:
			sealed = true
			fallthrough
		case errors.Is(err, store.ErrAlreadyHeld):
			res[i] = &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}
		default:
			res[i] = &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_FAILED, Reason: err.Error(),
				Code: uint32(transfer.Code(err))}
		}
	}
	if sealed {
		// Group commit: what this call sealed is in the catalog before the
		// coordinator hears "sealed", so a chunk reported stored survives a
		// crash of this process (the bytes are in shared memory already).
		// Concurrent commits share one bbolt transaction.
		if err := o.st.FlushCatalog(); err != nil {
			o.log.Error("commit: chunks are held but not recorded for a restart", "err", err)
		}
	}
	return res
}

// abortTokens frees the staged chunks of the given tokens.
func (o *owner) abortTokens(tokens []uint64) {
	for _, t := range tokens {
		o.mu.Lock()
		sc, ok := o.staged[t]
		delete(o.staged, t)
		o.mu.Unlock()
		if ok {
			sc.w.Abort()
		}
	}
}

// has answers which ids are held, pinning them under the coordinator's lease
// id when pin is set.
func (o *owner) has(ref *kvringv1.NamespaceRef, rawIDs [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error) {
	if ref == nil || ref.GetName() == "" {
		return nil, 0, fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument)
	}
	ids, err := parseIDs(rawIDs, len(rawIDs)) // the coordinator bounded the batch
	if err != nil {
		return nil, 0, err
	}
	var ttl time.Duration
	if pin != nil && pin.GetLeaseId() != 0 {
		ttl = min(time.Duration(pin.GetTtlMs())*time.Millisecond, o.maxPin)
	}
	held, p, err := o.st.Has(storeNamespace(ref.GetName(), ref.GetFingerprint()), ids, ttl)
	if err != nil {
		return nil, 0, err
	}
	if p != 0 {
		o.mu.Lock()
		lp := o.pins[pin.GetLeaseId()]
		lp.pins = append(lp.pins, p)
		lp.expires = o.now().Add(ttl)
		o.pins[pin.GetLeaseId()] = lp
		o.mu.Unlock()
	}
	return held, ttl, nil
}

// unpin ends the local pins taken under coordinator leases.
func (o *owner) unpin(leases []uint64) {
	for _, l := range leases {
		o.mu.Lock()
		lp := o.pins[l]
		delete(o.pins, l)
		o.mu.Unlock()
		for _, p := range lp.pins {
			o.st.Release(p)
		}
	}
}

// sweep forgets staged tokens and lease records whose time has passed (the
// store frees the slots and pins itself). Called by the node's maintenance
// loop.
func (o *owner) sweep(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for t, sc := range o.staged {
		if now.After(sc.expires) {
			delete(o.staged, t)
			sc.w.Abort()
		}
	}
	for l, lp := range o.pins {
		if now.After(lp.expires) {
			delete(o.pins, l)
		}
	}
}

// peerService adapts owner to the generated Peer gRPC service.
type peerService struct {
	kvringv1.UnimplementedPeerServer
	o *owner
	m *metrics
}

func (ps *peerService) Prepare(stream grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	defer observeSince(ps.m.prepareSeconds, time.Now())
	o := ps.o
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return transfer.ToStatus(fmt.Errorf("%w: prepare stream ended before its begin message", transfer.ErrInvalidArgument))
	}
	if err != nil {
		return transfer.ToStatus(err)
	}
	begin := first.GetBegin()
	if begin == nil {
		return transfer.ToStatus(fmt.Errorf("%w: the first prepare message must be begin", transfer.ErrInvalidArgument))
	}
	p, need, votes, err := o.newPrepare(begin.GetNamespace(), begin.GetChunks())
	if err != nil {
		return transfer.ToStatus(err)
	}
	ok := false
	defer func() {
		if !ok {
			p.abort()
		}
	}()
	if err := stream.Send(&kvringv1.PrepareResponse{Epoch: o.epoch(), Msg: &kvringv1.PrepareResponse_Need{
		Need: &kvringv1.PrepareNeed{Need: need, Votes: votes}}}); err != nil {
		return err
	}
	in := transfer.InFrame{Msg: new(kvringv1.PrepareRequest), Field: transfer.PrepareDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		if err == io.EOF {
			break // half-close counts as end
		}
		if err != nil {
			return err
		}
		if in.Msg.(*kvringv1.PrepareRequest).GetEnd() != nil {
			break
		}
		f, isFrame := in.Frame()
		if !isFrame {
			return transfer.ToStatus(fmt.Errorf("%w: a second begin in one prepare stream", transfer.ErrInvalidArgument))
		}
		ps.m.peerReceived.Add(float64(f.Len()))
		err = p.frame(f)
		in.Release()
		if err != nil {
			return transfer.ToStatus(err)
		}
	}
	ok = true
	return stream.Send(&kvringv1.PrepareResponse{Epoch: o.epoch(), Msg: &kvringv1.PrepareResponse_Votes{
		Votes: &kvringv1.PrepareVotes{Votes: o.endPrepare(p)}}})
}

func (ps *peerService) Commit(ctx context.Context, req *kvringv1.CommitRequest) (*kvringv1.CommitResponse, error) {
	defer observeSince(ps.m.commitSeconds, time.Now())
	return &kvringv1.CommitResponse{Epoch: ps.o.epoch(), Results: ps.o.commit(req.GetNamespace(), req.GetChunks())}, nil
}

func (ps *peerService) Abort(ctx context.Context, req *kvringv1.AbortRequest) (*kvringv1.AbortResponse, error) {
	ps.o.abortTokens(req.GetStageTokens())
	return &kvringv1.AbortResponse{Epoch: ps.o.epoch()}, nil
}

func (ps *peerService) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	defer observeSince(ps.m.hasSeconds, time.Now())
	held, ttl, err := ps.o.has(req.GetNamespace(), req.GetIds(), req.GetPin())
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return &kvringv1.HasResponse{Epoch: ps.o.epoch(), Held: held, LeaseTtlMs: uint32(ttl / time.Millisecond)}, nil
}

func (ps *peerService) Unpin(ctx context.Context, req *kvringv1.UnpinRequest) (*kvringv1.UnpinResponse, error) {
	ps.o.unpin(req.GetLeaseIds())
	return &kvringv1.UnpinResponse{Epoch: ps.o.epoch()}, nil
}

func (ps *peerService) Fetch(req *kvringv1.FetchRequest, stream grpc.ServerStreamingServer[kvringv1.FetchResponse]) error {
	defer observeSince(ps.m.fetchSeconds, time.Now())
	o := ps.o
	ref := req.GetNamespace()
	if ref == nil || ref.GetName() == "" {
		return transfer.ToStatus(fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument))
	}
	ns := storeNamespace(ref.GetName(), ref.GetFingerprint())
	for i, b := range req.GetIds() {
		id, err := store.ParseID(b)
		if err != nil {
			return transfer.ToStatus(fmt.Errorf("%w: ids[%d]: must be %d bytes, got %d", transfer.ErrInvalidArgument, i, store.IDSize, len(b)))
		}
		err = sendLocalChunk(o.st, ns, id, uint32(i), nil, func(h *kvringv1.ChunkHeader, f *kvringv1.DataFrame) error {
			if h != nil {
				return stream.Send(&kvringv1.FetchResponse{Epoch: o.epoch(), Msg: &kvringv1.FetchResponse_Header{Header: h}})
			}
			if err := stream.Send(&kvringv1.FetchResponse{Epoch: o.epoch(), Msg: &kvringv1.FetchResponse_Data{Data: f}}); err != nil {
				return err
			}
			ps.m.peerSent.Add(float64(len(f.GetData())))
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (ps *peerService) PutNamespace(ctx context.Context, req *kvringv1.PutNamespaceRequest) (*kvringv1.PutNamespaceResponse, error) {
	rec := req.GetNamespace()
	if rec == nil || rec.GetName() == "" || len(rec.GetFingerprint()) == 0 {
		return nil, transfer.ToStatus(fmt.Errorf("%w: namespace record with a name and fingerprint is required", transfer.ErrInvalidArgument))
	}
	held, accepted := ps.o.reg.merge(rec)
	return &kvringv1.PutNamespaceResponse{Epoch: ps.o.epoch(), Namespace: held, Accepted: accepted}, nil
}

func (ps *peerService) ListNamespaces(ctx context.Context, req *kvringv1.ListNamespacesRequest) (*kvringv1.ListNamespacesResponse, error) {
	want := map[string]bool{}
	for _, n := range req.GetNames() {
		want[n] = true
	}
	var out []*kvringv1.NamespaceRecord
	for _, r := range ps.o.reg.list() {
		if len(want) == 0 || want[r.GetName()] {
			out = append(out, r)
		}
	}
	return &kvringv1.ListNamespacesResponse{Epoch: ps.o.epoch(), Namespaces: out}, nil
}

// sendLocalChunk sends one chunk of the local store as a header and frames:
// FOUND with its bytes after a checksum pass, or NOT_FOUND (a chunk failing
// its checksum is dropped by the store and reported as not found).
func sendLocalChunk(st *store.Store, ns string, id store.ID, index uint32, holder *kvringv1.NodeRef,
	send func(*kvringv1.ChunkHeader, *kvringv1.DataFrame) error) error {
	v, err := st.Get(ns, id)
	if err != nil {
		reason := "not held"
		if !errors.Is(err, store.ErrNotFound) {
			reason = err.Error()
		}
		return send(&kvringv1.ChunkHeader{Index: index, Status: kvringv1.ReadStatus_READ_STATUS_NOT_FOUND, Reason: reason}, nil)
	}
	defer v.Release()
	return sendView(v, id, index, holder, send)
}

// sendView sends a held chunk as a FOUND header and its frames.
func sendView(v *store.View, id store.ID, index uint32, holder *kvringv1.NodeRef,
	send func(*kvringv1.ChunkHeader, *kvringv1.DataFrame) error) error {
	b := v.Bytes()
	h := &kvringv1.ChunkHeader{Index: index, Status: kvringv1.ReadStatus_READ_STATUS_FOUND, Holder: holder,
		Chunk: &kvringv1.ChunkRef{Id: id[:], Size: uint64(len(b)), Crc32C: v.Checksum()}}
	if err := send(h, nil); err != nil {
		return err
	}
	return transfer.SplitFrames(index, b, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error { return send(nil, f) })
}

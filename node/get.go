package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// fetchStream reads one owner's Fetch answer for its share of a Get, in
// order.
type fetchStream struct {
	m       ring.Member
	stream  grpc.ServerStreamingClient[kvringv1.FetchResponse]
	cancel  context.CancelFunc
	timeout time.Duration // bounds the wait for each chunk
	broken  error
	recv    prometheus.Counter // bytes received from the peer
	// answered: the peer sent at least one message.
	answered bool
}

// next reads the next chunk, which must be id: its header and, when found,
// its bytes with their CRC-32C, computed as they were copied out of the
// received frames. A chunk that does not arrive within the timeout breaks
// the stream (the owner is treated as unavailable from then on).
func (f *fetchStream) next(id store.ID) (h *kvringv1.ChunkHeader, data []byte, sum uint32, err error) {
	if f.broken != nil {
		return nil, nil, 0, f.broken
	}
	if f.cancel != nil && f.timeout > 0 {
		defer time.AfterFunc(f.timeout, f.cancel).Stop()
	}
	in := transfer.InFrame{Msg: new(kvringv1.FetchResponse), Field: transfer.FetchDataField}
	defer in.Release()
	if err := f.stream.RecvMsg(&in); err != nil {
		f.broken = transfer.FromStatus(err)
		return nil, nil, 0, f.broken
	}
	f.answered = true
	h = in.Msg.(*kvringv1.FetchResponse).GetHeader()
	if h == nil {
		f.broken = fmt.Errorf("node %s sent data before a header", f.m.ID)
		return nil, nil, 0, f.broken
	}
	if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
		return h, nil, 0, nil
	}
	if !bytes.Equal(h.GetChunk().GetId(), id[:]) {
		f.broken = fmt.Errorf("node %s answered with chunk %x where %x was due", f.m.ID, h.GetChunk().GetId(), id[:])
		return nil, nil, 0, f.broken
	}
	size := h.GetChunk().GetSize()
	buf := make([]byte, 0, size)
	for uint64(len(buf)) < size {
		if err := f.stream.RecvMsg(&in); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			f.broken = transfer.FromStatus(err)
			return nil, nil, 0, f.broken
		}
		fr, ok := in.Frame()
		if !ok || fr.Offset != uint64(len(buf)) || uint64(len(buf)+fr.Len()) > size {
			f.broken = fmt.Errorf("node %s sent a malformed frame", f.m.ID)
			return nil, nil, 0, f.broken
		}
		buf, sum = fr.AppendChecksum(buf, sum)
		in.Release()
		f.recv.Add(float64(fr.Len()))
	}
	return h, buf, sum, nil
}

// get streams each id's chunk to the engine in order: from the first owner
// that has it and whose bytes pass the checksum, else an explicit miss
// (NOT_FOUND, or UNAVAILABLE when no owner answered). Bytes that fail their
// checksum are never sent.
func (c *coordinator) get(req *kvringv1.GetRequest, stream grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	defer observeSince(c.m.getSeconds, time.Now())
	ctx := stream.Context()
	ns, rec, err := c.reg.resolve(req.GetNamespace())
	if err != nil {
		return transfer.ToStatus(err)
	}
	ids, err := parseIDs(req.GetIds(), c.maxBatch)
	if err != nil {
		return transfer.ToStatus(err)
	}
	rg, err := c.currentRing()
	if err != nil {
		return transfer.ToStatus(err)
	}
	ref := &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()}
	replicas := int(max(1, rec.GetReplicationFactor()))
	epoch := rg.Epoch()
	send := func(h *kvringv1.ChunkHeader, f *kvringv1.DataFrame) error {
		if h != nil {
			return stream.Send(&kvringv1.GetResponse{Epoch: epoch, Msg: &kvringv1.GetResponse_Header{Header: h}})
		}
		return stream.Send(&kvringv1.GetResponse{Epoch: epoch, Msg: &kvringv1.GetResponse_Data{Data: f}})
	}

	// One Fetch stream per remote primary owner, for its ids in order.
	owners := make([][]ring.Member, len(ids))
	primaries := map[string][][]byte{}
	unsettled := c.isUnsettled()
	for i, id := range ids {
		owners[i] = rg.Owners(rec.GetName(), id[:], replicas)
		if unsettled {
			// Shortly after a ring change a chunk may sit on a non-owner.
			owners[i] = append(owners[i], nonOwners(rg, owners[i])...)
		}
		if p := owners[i][0]; p.ID != c.self {
			primaries[p.ID] = append(primaries[p.ID], id[:])
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streams := map[string]*fetchStream{}
	for i := range ids {
		p := owners[i][0]
		if p.ID == c.self || streams[p.ID] != nil {
			continue
		}
		sctx, scancel := context.WithCancel(fctx)
		fs := &fetchStream{m: p, cancel: scancel, timeout: c.peerTimeout, recv: c.m.peerReceived}
		streams[p.ID] = fs
		pc, err := c.pool.client(p.Addr)
		if err == nil {
			fs.stream, err = pc.Fetch(sctx, &kvringv1.FetchRequest{Caller: c.caller(), Namespace: ref, Ids: primaries[p.ID]})
		}
		if err != nil {
			fs.broken = transfer.FromStatus(err)
			c.peers.note(ctx, p, fs.broken)
		}
	}
	defer func() {
		for _, fs := range streams {
			if fs.broken == nil && fs.answered {
				c.peers.ok(fs.m)
			}
		}
	}()

	for i, id := range ids {
		idx := uint32(i)
		var reasons []string
		unavailable := 0
		done, badSum := false, false
		for k, m := range owners[i] {
			if m.ID == c.self {
				size, rerr, err := c.sendLocal(ns, id, idx, m, send)
				if err != nil {
					return err // the engine went away
				}
				if size > 0 {
					c.m.getBytes.Add(float64(size))
					done = true
					break
				}
				badSum = badSum || errors.Is(rerr, store.ErrChecksum)
				reasons = append(reasons, fmt.Sprintf("node %s: not held", m.ID))
				continue
			}
			var h *kvringv1.ChunkHeader
			var data []byte
			var sum uint32
			var ferr error
			if k == 0 {
				fs := streams[m.ID]
				wasBroken := fs.broken != nil
				h, data, sum, ferr = fs.next(id)
				if ferr != nil && !wasBroken {
					c.peers.note(ctx, m, ferr) // once per stream; ok is noted at the end
				}
			} else {
				h, data, sum, ferr = c.fetchOne(ctx, m, ref, id)
				c.peers.note(ctx, m, ferr)
			}
			if ferr != nil {
				unavailable++
				reasons = append(reasons, fmt.Sprintf("node %s: %v", m.ID, ferr))
				continue
			}
			if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
				reasons = append(reasons, fmt.Sprintf("node %s: %s", m.ID, h.GetReason()))
				continue
			}
			if sum != h.GetChunk().GetCrc32C() {
				badSum = true
				reasons = append(reasons, fmt.Sprintf("node %s: bytes failed their checksum", m.ID))
				continue
			}
			h.Index = idx
			h.Holder = &kvringv1.NodeRef{NodeId: m.ID, GrpcAddr: m.Addr}
			if err := send(h, nil); err != nil {
				return err
			}
			if err := transfer.SplitFrames(idx, data, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error { return send(nil, f) }); err != nil {
				return err
			}
			c.m.getBytes.Add(float64(len(data)))
			done = true
			break
		}
		if done {
			c.m.getBy[getHit].Inc()
			continue
		}
		status := kvringv1.ReadStatus_READ_STATUS_NOT_FOUND
		result := getMiss
		if unavailable == len(owners[i]) {
			status = kvringv1.ReadStatus_READ_STATUS_UNAVAILABLE
			result = getUnavailable
		}
		if badSum {
			result = getChecksumError
		}
		c.m.getBy[result].Inc()
		if err := send(&kvringv1.ChunkHeader{Index: idx, Status: status, Reason: joinReasons(reasons)}, nil); err != nil {
			return err
		}
	}
	return nil
}

// sendLocal sends a chunk of this node's store if it holds it (after a
// checksum pass) and returns its size (0: not sent, with the store's reason
// in readErr); err is the engine's stream failing.
func (c *coordinator) sendLocal(ns string, id store.ID, idx uint32, m ring.Member,
	send func(*kvringv1.ChunkHeader, *kvringv1.DataFrame) error) (size int, readErr, err error) {
	v, rerr := c.local.st.Get(ns, id)
	if rerr != nil {
		return 0, rerr, nil
	}
	defer v.Release()
	return len(v.Bytes()), nil, sendView(v, id, idx, &kvringv1.NodeRef{NodeId: m.ID, GrpcAddr: m.Addr}, send)
}

// fetchOne reads a single chunk from a fallback owner.
func (c *coordinator) fetchOne(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, id store.ID) (*kvringv1.ChunkHeader, []byte, uint32, error) {
	pc, err := c.pool.client(m.Addr)
	if err != nil {
		return nil, nil, 0, err
	}
	fctx, cancel := c.peerCtx(ctx)
	defer cancel()
	s, err := pc.Fetch(fctx, &kvringv1.FetchRequest{Caller: c.caller(), Namespace: ref, Ids: [][]byte{id[:]}})
	if err != nil {
		return nil, nil, 0, transfer.FromStatus(err)
	}
	fs := &fetchStream{m: m, stream: s, recv: c.m.peerReceived}
	return fs.next(id)
}

func joinReasons(r []string) string {
	out := ""
	for i, s := range r {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// nonOwners returns the members of rg that are not in owners.
func nonOwners(rg *ring.Ring, owners []ring.Member) []ring.Member {
	var out []ring.Member
	for _, m := range rg.Members() {
		if !slices.ContainsFunc(owners, func(o ring.Member) bool { return o.ID == m.ID }) {
			out = append(out, m)
		}
	}
	return out
}

package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	// maxChunk bounds the size a peer may declare (this node's largest chunk).
	maxChunk int64
	// answered: the peer sent at least one message.
	answered bool
}

// next reads the next chunk, which must be id: its header and, when found,
// its bytes with their CRC-32C, computed as they were copied out of the
// received frames. A stream on which nothing arrives for the timeout (the
// header, or the next frame of a chunk) breaks (the owner is treated as
// unavailable from then on); a large chunk that keeps arriving is not cut
// off, however long it takes.
func (f *fetchStream) next(id store.ID) (h *kvringv1.ChunkHeader, data []byte, sum uint32, err error) {
	if f.broken != nil {
		return nil, nil, 0, f.broken
	}
	progress := func() {}
	if f.cancel != nil && f.timeout > 0 {
		t := time.AfterFunc(f.timeout, f.cancel)
		defer t.Stop()
		progress = func() { t.Reset(f.timeout) }
	}
	in := transfer.InFrame{Msg: new(kvringv1.FetchResponse), Field: transfer.FetchDataField}
	defer in.Release()
	if err := f.stream.RecvMsg(&in); err != nil {
		f.broken = transfer.FromStatus(err)
		return nil, nil, 0, f.broken
	}
	f.answered = true
	progress()
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
	if limit := uint64(f.maxChunk); size > limit {
		f.broken = fmt.Errorf("node %s declared chunk %x of %d bytes, above the largest chunk %d", f.m.ID, id[:], size, limit)
		return nil, nil, 0, f.broken
	}
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
		progress()
		f.recv.Add(float64(fr.Len()))
	}
	return h, buf, sum, nil
}

// fetchOne reads a single chunk from a fallback owner.
func (c *Coordinator) fetchOne(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, id store.ID) (*kvringv1.ChunkHeader, []byte, uint32, error) {
	pc, err := c.peer(m)
	if err != nil {
		return nil, nil, 0, err
	}
	fctx, cancel := c.peerCtx(ctx)
	defer cancel()
	s, err := pc.Fetch(fctx, &kvringv1.FetchRequest{Caller: c.caller(), Namespace: ref, Ids: [][]byte{id[:]}})
	if err != nil {
		return nil, nil, 0, transfer.FromStatus(err)
	}
	fs := &fetchStream{m: m, stream: s, recv: c.m.PeerReceived, maxChunk: c.local.MaxChunk()}
	return fs.next(id)
}

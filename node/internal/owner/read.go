package owner

import (
	"errors"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// SendFunc sends one message of a chunk read: a header (h non-nil) or a data
// frame. The frame's bytes are only valid until it returns.
type SendFunc func(h *kvringv1.ChunkHeader, f *kvringv1.DataFrame) error

// Send sends chunk id of store namespace ns, if this node holds it, as a
// FOUND header naming holder and its frames, after one checksum pass (a
// chunk whose bytes fail it is dropped by the store and not sent). It
// returns the bytes sent; when nothing was sent, readErr is the store's
// reason (store.ErrNotFound when not held). err is send failing: the
// receiver went away, or the chunk's memory faulted (its segment file was
// truncated) while a frame was copied out of it. The bytes are read in
// place from shared memory, under a fault guard, held by a View until the
// last frame is sent.
func (o *Owner) Send(ns string, id store.ID, index uint32, holder *kvringv1.NodeRef, send SendFunc) (sent int, readErr, err error) {
	v, err := o.st.Get(ns, id)
	if err != nil {
		return 0, err, nil
	}
	defer v.Release()
	b := v.Bytes()
	h := &kvringv1.ChunkHeader{Index: index, Status: kvringv1.ReadStatus_READ_STATUS_FOUND, Holder: holder,
		Chunk: &kvringv1.ChunkRef{Id: id[:], Size: uint64(len(b)), Crc32C: v.Checksum()}}
	if err := send(h, nil); err != nil {
		return 0, nil, err
	}
	// The frames are copied out of the mapping under a fault guard: a
	// local socket client that was passed the segment may truncate it.
	if ferr := v.Read(func(b []byte) {
		err = transfer.SplitFrames(index, b, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error { return send(nil, f) })
	}); ferr != nil {
		return 0, nil, ferr
	}
	return len(b), nil, err
}

// notFound is the header of a chunk a Fetch cannot send, with the store's
// reason.
func notFound(index uint32, readErr error) *kvringv1.ChunkHeader {
	reason := "not held"
	if !errors.Is(readErr, store.ErrNotFound) {
		reason = readErr.Error()
	}
	return &kvringv1.ChunkHeader{Index: index, Status: kvringv1.ReadStatus_READ_STATUS_NOT_FOUND, Reason: reason}
}

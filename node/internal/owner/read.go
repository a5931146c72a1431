package owner

import (
	"errors"
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// SendFunc sends one message of a chunk read: a header (h non-nil) or a data
// frame (f non-nil), encoded for the data field of GetResponse and
// FetchResponse (transfer.GetDataField, transfer.FetchDataField: both 3).
// It takes the frame: it passes it to a stream's SendMsg, which hands its
// buffer to gRPC, or Releases it.
type SendFunc func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error

// The frames Send encodes serve Get and Fetch answers alike.
var _ = [1]struct{}{}[transfer.GetDataField-transfer.FetchDataField]

// Send sends chunk id of store namespace ns, if this node holds it, as a
// FOUND header naming holder and its frames. It returns the bytes sent;
// when nothing was sent, readErr is the store's reason (store.ErrNotFound
// when not held, store.ErrChecksum when its bytes fail their checksum: the
// store drops such a chunk). err is the stream failing: send failed (the
// receiver went away), or a fault cut off a streamed chunk (sendStreamed).
//
// The bytes are read in place from shared memory, under a fault guard (a
// local socket client that was passed the segment may truncate it), and
// copied into the frames and checksummed in that one pass; the frames go
// out once the whole chunk matched its checksum, so bytes that fail it are
// never sent. Memory: the chunk's frames (about its size, see
// transfer.FrameLen) are held at once, from the frame pool, until gRPC has
// written them; a chunk above wholeSendMax is streamed instead
// (sendStreamed).
func (o *Owner) Send(ns string, id store.ID, index uint32, holder *kvringv1.NodeRef, send SendFunc) (sent int, readErr, err error) {
	v, err := o.st.Lend(ns, id)
	if err != nil {
		return 0, err, nil
	}
	if len(v.Bytes()) > wholeSendMax {
		v.Release()
		return o.sendStreamed(ns, id, index, holder, send)
	}
	frames, crc, size, ferr := copyFrames(v, index)
	sum := v.Checksum()
	v.Release()
	defer func() { releaseFrames(frames) }()
	if ferr != nil || crc != sum {
		// A fault or a mismatch: store.Get checks the bytes again under its
		// own guard, and drops the chunk (counted, logged) if they fail.
		// Rare: the chunk was verified when it was sealed.
		releaseFrames(frames)
		if frames, crc, size, readErr = o.verifiedFrames(ns, id, index); readErr != nil {
			return 0, readErr, nil
		}
	}
	h := &kvringv1.ChunkHeader{Index: index, Status: kvringv1.ReadStatus_READ_STATUS_FOUND, Holder: holder,
		Chunk: &kvringv1.ChunkRef{Id: id[:], Size: uint64(size), Crc32C: crc}}
	if err := send(h, nil); err != nil {
		return 0, nil, err
	}
	for i, f := range frames {
		frames[i] = nil // send takes it
		if err := send(nil, f); err != nil {
			return 0, nil, err
		}
	}
	return size, nil, nil
}

// wholeSendMax is the largest chunk Send copies into frames whole before it
// sends the first: a larger one is verified first and streamed a frame at a
// time (sendStreamed), so that a read holds at most this much in frame
// buffers however large chunks are (the store accepts up to 64 MiB by
// default) and however slowly the receiver reads.
const wholeSendMax = 8 << 20

// sendStreamed is Send for a chunk above wholeSendMax: store.Get verifies
// the bytes under its fault guard, then each frame is copied (under the
// guard again) and sent before the next is made. The bytes were verified
// before the first was sent, and the receiver checks the checksum again,
// as for every read. A fault part-way (a local client truncated the
// segment since) fails the stream: part of the chunk was sent.
func (o *Owner) sendStreamed(ns string, id store.ID, index uint32, holder *kvringv1.NodeRef, send SendFunc) (sent int, readErr, err error) {
	v, err := o.st.Get(ns, id)
	if err != nil {
		return 0, err, nil
	}
	defer v.Release()
	size := len(v.Bytes())
	h := &kvringv1.ChunkHeader{Index: index, Status: kvringv1.ReadStatus_READ_STATUS_FOUND, Holder: holder,
		Chunk: &kvringv1.ChunkRef{Id: id[:], Size: uint64(size), Crc32C: v.Checksum()}}
	if err := send(h, nil); err != nil {
		return 0, nil, err
	}
	for off := 0; off < size; {
		n := transfer.FrameLen(size - off)
		f, err := transfer.EncodeFrame(transfer.GetDataField, index, uint64(off), n)
		if err != nil {
			return 0, nil, err
		}
		if rerr := v.Read(func(b []byte) { copy(f.Data(), b[off:off+n]) }); rerr != nil {
			f.Release()
			return 0, nil, fmt.Errorf("chunk %s/%s cut off after %d of %d bytes: %w", ns, id, off, size, rerr)
		}
		if err := send(nil, f); err != nil {
			return 0, nil, err
		}
		off += n
	}
	return size, nil, nil
}

// verifiedFrames is Send's slow path: the chunk read with store.Get (which
// verifies it first), then copied into frames. readErr is the store's
// reason when it is not sent.
func (o *Owner) verifiedFrames(ns string, id store.ID, index uint32) (frames []*transfer.EncodedFrame, crc uint32, size int, readErr error) {
	v, err := o.st.Get(ns, id)
	if err != nil {
		return nil, 0, 0, err
	}
	defer v.Release()
	frames, crc, size, err = copyFrames(v, index)
	if err == nil && crc != v.Checksum() {
		err = fmt.Errorf("chunk %s/%s: %w (changed after it was verified)", ns, id, store.ErrChecksum)
	}
	if err != nil {
		releaseFrames(frames)
		return nil, 0, 0, err
	}
	return frames, crc, size, nil
}

// copyFrames copies v's bytes, under the store's fault guard, into encoded
// frames for chunk index (of transfer.FrameLen bytes each, so that their
// buffers hold about the chunk's size), and returns them with the bytes'
// CRC-32C computed in the same pass. On error (a fault) the frames made so
// far are returned too, for the caller to release.
func copyFrames(v *store.View, index uint32) (frames []*transfer.EncodedFrame, crc uint32, size int, err error) {
	size = len(v.Bytes())
	if size == 0 {
		return nil, 0, 0, nil
	}
	frames = make([]*transfer.EncodedFrame, 0, size/transfer.MaxFrameBytes+8)
	for off := 0; off < size; {
		n := transfer.FrameLen(size - off)
		f, err := transfer.EncodeFrame(transfer.GetDataField, index, uint64(off), n)
		if err != nil {
			return frames, 0, 0, err
		}
		frames = append(frames, f)
		off += n
	}
	err = v.Read(func(b []byte) {
		off := 0
		for _, f := range frames {
			dst, src := f.Data(), b[off:][:f.Len()]
			off += f.Len()
			for len(src) > 0 {
				n := min(len(src), copyPiece)
				crc = store.CopyChecksum(dst[:n], src[:n], crc)
				dst, src = dst[n:], src[n:]
			}
		}
	})
	return frames, crc, size, err
}

// copyPiece is the most bytes copyFrames hands store.CopyChecksum at once:
// below the size from which it stores around the cache (non-temporal
// stores, for a staged write that is not read back), since gRPC reads each
// frame again soon after to write it out. With 256 KiB pieces (non-temporal)
// a 256 KiB get cost more CPU than the two passes it replaces.
const copyPiece = 128 << 10

// releaseFrames releases the frames not sent (nil entries were).
func releaseFrames(frames []*transfer.EncodedFrame) {
	for _, f := range frames {
		if f != nil {
			f.Release()
		}
	}
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

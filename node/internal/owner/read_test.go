package owner

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// sealChunk stores data as chunk id of store namespace ns.
func sealChunk(t testing.TB, st *store.Store, ns string, id store.ID, data []byte) {
	t.Helper()
	w, err := st.Stage(ns, id, int64(len(data)), store.Checksum(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
}

// sentChunk is what a SendFunc received, the frames decoded as a Get
// answer's data frames would be by any gRPC client.
type sentChunk struct {
	headers []*kvringv1.ChunkHeader
	frames  []*kvringv1.DataFrame
}

func (s *sentChunk) send(t *testing.T) SendFunc {
	return func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error {
		if h != nil {
			s.headers = append(s.headers, h)
			return nil
		}
		bs, err := transfer.NewCodec().Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		defer bs.Free()
		var m kvringv1.GetResponse
		if err := proto.Unmarshal(bs.Materialize(), &m); err != nil {
			t.Fatal(err)
		}
		s.frames = append(s.frames, m.GetData())
		return nil
	}
}

// joined checks that the frames sent are chunk index's, in offset order,
// each at most MaxFrameBytes, and returns their bytes joined.
func (s *sentChunk) joined(t *testing.T, index uint32) []byte {
	t.Helper()
	var joined []byte
	for i, f := range s.frames {
		if f.GetIndex() != index || f.GetOffset() != uint64(len(joined)) || len(f.GetData()) > transfer.MaxFrameBytes {
			t.Fatalf("frame %d: index %d offset %d, %d bytes", i, f.GetIndex(), f.GetOffset(), len(f.GetData()))
		}
		joined = append(joined, f.GetData()...)
	}
	return joined
}

// TestSendCopiesAChunkIntoFramesOnceAndChecksumsIt: a chunk of several
// frames goes out as a FOUND header with its size and CRC-32C, then frames
// of at most MaxFrameBytes in offset order that protobuf decodes to the
// chunk's bytes.
func TestSendCopiesAChunkIntoFramesOnceAndChecksumsIt(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwner(t)
	var id store.ID
	id[0] = 1
	data := make([]byte, 2*transfer.MaxFrameBytes+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	sealChunk(t, st, "ns", id, data)
	var got sentChunk
	sent, readErr, err := o.Send("ns", id, 4, &kvringv1.NodeRef{NodeId: "n1"}, got.send(t))
	if err != nil || readErr != nil || sent != len(data) {
		t.Fatalf("Send: %d bytes, %v, %v", sent, readErr, err)
	}
	if len(got.headers) != 1 || got.headers[0].GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND ||
		got.headers[0].GetIndex() != 4 || got.headers[0].GetChunk().GetSize() != uint64(len(data)) ||
		got.headers[0].GetChunk().GetCrc32C() != store.Checksum(data) || got.headers[0].GetHolder().GetNodeId() != "n1" {
		t.Fatalf("headers %v", got.headers)
	}
	joined := got.joined(t, 4)
	want := 0 // frames cut as transfer.FrameLen says
	for off := 0; off < len(data); off += transfer.FrameLen(len(data) - off) {
		want++
	}
	if len(got.frames) != want || !bytes.Equal(joined, data) {
		t.Fatalf("%d frames of %d bytes in all, want %d frames of the chunk's %d", len(got.frames), len(joined), want, len(data))
	}
}

// TestSendNeverSendsBytesThatFailTheirChecksum: a chunk whose bytes changed
// in shared memory after it was sealed is not sent at all (no header, no
// frame); Send reports store.ErrChecksum, the store counts and drops it.
func TestSendNeverSendsBytesThatFailTheirChecksum(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwner(t)
	var id store.ID
	id[0] = 2
	data := bytes.Repeat([]byte("kvring"), 50_000)
	sealChunk(t, st, "ns", id, data)
	v, err := st.Lend("ns", id)
	if err != nil {
		t.Fatal(err)
	}
	v.Bytes()[len(data)/2] ^= 1 // the mapping is writable; a local client's bug could do this
	v.Release()

	var got sentChunk
	sent, readErr, err := o.Send("ns", id, 0, nil, got.send(t))
	if err != nil || sent != 0 || !errors.Is(readErr, store.ErrChecksum) {
		t.Fatalf("Send of a damaged chunk: %d bytes, %v, %v; want nothing sent and ErrChecksum", sent, readErr, err)
	}
	if len(got.headers)+len(got.frames) != 0 {
		t.Fatalf("sent %d headers and %d frames of a damaged chunk", len(got.headers), len(got.frames))
	}
	if n := st.Stats().ChecksumErrors; n != 1 {
		t.Fatalf("the store counted %d checksum errors, want 1", n)
	}
	if _, err := st.Lend("ns", id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the damaged chunk is still held: %v", err)
	}
}

// TestSendOfAChunkNotHeld: nothing is sent and readErr is store.ErrNotFound.
func TestSendOfAChunkNotHeld(t *testing.T) {
	t.Parallel()
	o, _, _ := newTestOwner(t)
	var got sentChunk
	sent, readErr, err := o.Send("ns", store.ID{9}, 0, nil, got.send(t))
	if err != nil || sent != 0 || !errors.Is(readErr, store.ErrNotFound) || len(got.headers)+len(got.frames) != 0 {
		t.Fatalf("Send of a chunk not held: %d bytes, %v, %v, %d messages", sent, readErr, err, len(got.headers)+len(got.frames))
	}
}

// TestSendStreamsAChunkAboveWholeSendMax: a chunk larger than wholeSendMax
// goes out as its FOUND header, with the size and checksum, then frames in
// offset order that join up to its bytes, as a smaller one does; it is
// verified before the header and streamed a frame at a time, each copied
// just before it is sent (so a read holds one frame's buffer, not the
// chunk's).
func TestSendStreamsAChunkAboveWholeSendMax(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwnerSized(t, 32<<20)
	var id store.ID
	id[0] = 9
	data := make([]byte, wholeSendMax+3*transfer.MaxFrameBytes/2)
	for i := range data {
		data[i] = byte(i*13 + i>>12)
	}
	sealChunk(t, st, "ns", id, data)
	// Once the header is out, the chunk's last byte changes in shared
	// memory: a streamed chunk's frames are copied after the header, so the
	// last frame carries the new byte (the receiver's checksum catches it);
	// a chunk copied whole before the header would not show it.
	v, err := st.Lend("ns", id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	var got sentChunk
	record := got.send(t)
	send := func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error {
		if h != nil {
			v.Bytes()[len(data)-1] ^= 0xff
		}
		return record(h, f)
	}
	sent, readErr, err := o.Send("ns", id, 2, &kvringv1.NodeRef{NodeId: "n1"}, send)
	if err != nil || readErr != nil || sent != len(data) {
		t.Fatalf("Send: %d bytes, %v, %v", sent, readErr, err)
	}
	if len(got.headers) != 1 || got.headers[0].GetChunk().GetSize() != uint64(len(data)) ||
		got.headers[0].GetChunk().GetCrc32C() != store.Checksum(data) {
		t.Fatalf("headers %v", got.headers)
	}
	joined := got.joined(t, 2)
	data[len(data)-1] ^= 0xff // what the frames must carry: the byte as it was when its frame was copied
	if !bytes.Equal(joined, data) {
		t.Fatalf("%d frames of %d bytes in all, not the chunk's %d as they were after the header went out", len(got.frames), len(joined), len(data))
	}
}

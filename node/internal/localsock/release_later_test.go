package localsock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"golang.org/x/sys/unix"
)

// hasBlob reports whether the node's table still has blob id.
func hasBlob(s *Server, id uint64) bool {
	s.tab.mu.Lock()
	defer s.tab.mu.Unlock()
	return s.tab.blobs[id] != nil
}

// clientModes are the two ways the Go client speaks: the binary get and
// release, and JSON only.
var clientModes = []struct {
	name string
	json bool
}{{"binary", false}, {"json", true}}

func dialMode(t *testing.T, s *Server, jsonOnly bool) *local.Client {
	t.Helper()
	c, err := local.Dial(context.Background(), local.Config{Path: s.Path(), JSON: jsonOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// getHeld gets the held chunk ids[0] and checks its bytes (as heldChunk
// wrote them).
func getHeld(t *testing.T, cl *local.Client, ns local.Namespace, ids [][32]byte) uint64 {
	t.Helper()
	got, err := cl.GetChunks(ns, ids, nil)
	if err != nil || len(got) != 1 || !got[0].Found || got[0].Blob == nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	for k, v := range got[0].Blob.Data {
		if v != byte(k*7) {
			t.Fatalf("byte %d of the chunk is %d, want %d", k, v, byte(k*7))
		}
	}
	return got[0].BlobID
}

// TestReleaseLaterKeepsTheChunkLentUntilTheNextCall: a release queued by
// ReleaseLater is not sent on its own; the chunk stays lent until the next
// call's write carries it, and that call's own reply is its own.
func TestReleaseLaterKeepsTheChunkLentUntilTheNextCall(t *testing.T) {
	t.Parallel()
	s, _, ns, ids := heldChunkOn(t, 64<<10, 1)
	for _, m := range clientModes {
		t.Run(m.name, func(t *testing.T) {
			cl := dialMode(t, s, m.json)
			first := getHeld(t, cl, ns, ids)
			if err := cl.ReleaseLater([]uint64{first}); err != nil {
				t.Fatal(err)
			}
			if !hasBlob(s, first) {
				t.Fatal("the queued release reached the node before any call")
			}
			second := getHeld(t, cl, ns, ids)
			if second == first || hasBlob(s, first) || !hasBlob(s, second) {
				t.Fatalf("after the get that carried the release of %#x: got %#x, first held %v, second held %v",
					first, second, hasBlob(s, first), hasBlob(s, second))
			}
			if err := cl.ReleaseLater([]uint64{second}); err != nil {
				t.Fatal(err)
			}
			if err := cl.Flush(); err != nil || hasBlob(s, second) {
				t.Fatalf("flush: %v; still held %v", err, hasBlob(s, second))
			}
			if n := cl.DeferredReleaseFailures(); n != 0 {
				t.Fatalf("%d deferred releases refused, want 0", n)
			}
		})
	}
}

// TestARefusedDeferredReleaseIsNotSwallowed: a release the node refuses
// (a blob this connection holds no reference to) is returned by the next
// Flush, or Close, as a *ReleaseError naming it, and counted; the call
// whose write carried it keeps its own result.
func TestARefusedDeferredReleaseIsNotSwallowed(t *testing.T) {
	t.Parallel()
	s, _, ns, ids := heldChunkOn(t, 64<<10, 1)
	const bogus = 1<<63 | 0xdead
	for _, m := range clientModes {
		t.Run(m.name, func(t *testing.T) {
			cl := dialMode(t, s, m.json)
			held := getHeld(t, cl, ns, ids)
			if err := cl.ReleaseLater([]uint64{bogus, held}); err != nil {
				t.Fatal(err)
			}
			getHeld(t, cl, ns, ids) // carries the release; its own result stands
			wantRefused(t, cl.Flush(), []uint64{bogus, held}, 1)
			if n := cl.DeferredReleaseFailures(); n != 1 {
				t.Fatalf("%d deferred releases refused, want 1", n)
			}
			if err := cl.Flush(); err != nil {
				t.Fatalf("a second flush: %v, want nil (reported once)", err)
			}
			if err := cl.ReleaseLater([]uint64{bogus}); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, cl.Close(), []uint64{bogus}, 0)
			if n := cl.DeferredReleaseFailures(); n != 2 {
				t.Fatalf("%d deferred releases refused, want 2", n)
			}
		})
	}
}

func wantRefused(t *testing.T, err error, ids []uint64, released int) {
	t.Helper()
	var re *local.ReleaseError
	if !errors.As(err, &re) || !slices.Equal(re.IDs, ids) || re.Released != released {
		t.Fatalf("error %v, want a *ReleaseError of %#x with %d released", err, ids, released)
	}
}

// TestPipelinedRequestsAreAnsweredInOrderWithTheirDescriptors: requests
// sent in one write are answered in order, the replies held back to be
// written together, and a descriptor still follows the reply that
// announces it, before the next reply.
func TestPipelinedRequestsAreAnsweredInOrderWithTheirDescriptors(t *testing.T) {
	t.Parallel()
	s, _, ns, ids := heldChunkOn(t, 64<<10, 1)
	r := rawDial(t, s)
	r.register()
	get := binGetBody(ns.Name, ns.Fingerprint, ids[0])
	var msg []byte
	for _, body := range [][]byte{get, get, []byte(`{"type": "instance_status_request"}`)} {
		msg = append(u64(msg, uint64(len(body))), body...)
	}
	if _, err := r.nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		op, rest := recvBinary(t, r)
		if op != binGet|binReply || len(rest) < 5 || rest[4] != 1 {
			t.Fatalf("reply %d: op %#x %x, want a get reply that found the chunk", i, op, rest)
		}
		if i == 0 {
			r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			oob := make([]byte, unix.CmsgSpace(4*4))
			n, oobn, _, _, err := r.nc.ReadMsgUnix(make([]byte, 1), oob)
			if err != nil || n != 1 {
				t.Fatalf("the segment's descriptor after the first reply: %d bytes, %v", n, err)
			}
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil || len(msgs) != 1 {
				t.Fatalf("no descriptor after the first reply (%v)", err)
			}
			fds, err := unix.ParseUnixRights(&msgs[0])
			if err != nil || len(fds) != 1 {
				t.Fatalf("want one descriptor, got %d (%v)", len(fds), err)
			}
			unix.Close(fds[0])
		}
	}
	m, err := r.recv()
	if err != nil || m["type"] != "instance_status_reply" {
		t.Fatalf("third reply %v %v, want instance_status_reply", m, err)
	}
}

// binGetBody is a binary get of one chunk.
func binGetBody(ns string, fp []byte, id [32]byte) []byte {
	b := []byte{binMagic, binGet, 0}
	b = appendStr(b, ns)
	b = appendStr(b, string(fp))
	b = u32(b, 1)
	return append(b, id[:]...)
}

// TestAReplyLongerThanTheClientsBufferKeepsItsDescriptors: a reply longer
// than the Go client's read buffer (16 KiB), with a segment's descriptor
// after it, is read whole and the descriptor still maps the blobs (the
// client reads the rest of a long reply exactly, nothing past it).
func TestAReplyLongerThanTheClientsBufferKeepsItsDescriptors(t *testing.T) {
	t.Parallel()
	s := startServer(t, testStore(t, 64<<20), nil)
	for _, m := range clientModes {
		t.Run(m.name, func(t *testing.T) {
			cl := dialMode(t, s, m.json)
			sizes := make([]int64, 1000) // 40 KB of blob records in binary, more in JSON
			for i := range sizes {
				sizes[i] = 4096
			}
			bs, err := cl.CreateBlobs(sizes)
			if err != nil || len(bs) != len(sizes) || cl.Segments() == 0 {
				t.Fatalf("create %d blobs: %d, %v; %d segments mapped", len(sizes), len(bs), err, cl.Segments())
			}
			for i, b := range bs {
				b.Data[0], b.Data[4095] = byte(i), byte(i>>8)
			}
			for i, b := range bs {
				if b.Data[0] != byte(i) || b.Data[4095] != byte(i>>8) {
					t.Fatalf("blob %d does not keep its bytes: two blobs share memory", i)
				}
			}
		})
	}
}

package localsock

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/sockwire"
	"github.com/kvring/kvring/internal/testutil"
	"golang.org/x/sys/unix"
)

// recvBinary reads one reply, which must be in the binary framing, and
// returns its op and what follows it.
func recvBinary(t *testing.T, r *rawConn) (byte, []byte) {
	t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [8]byte
	if _, err := io.ReadFull(r.nc, hdr[:]); err != nil {
		t.Fatalf("no reply: %v", err)
	}
	body := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
	if _, err := io.ReadFull(r.nc, body); err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if len(body) < 2 || body[0] != binMagic {
		t.Fatalf("reply %q is not in the binary framing", body)
	}
	return body[1], body[2:]
}

// wantBinaryError checks the next reply is a binary error reply with code.
func wantBinaryError(t *testing.T, r *rawConn, code uint32, what string) {
	t.Helper()
	op, rest := recvBinary(t, r)
	if op != binError || len(rest) < 4 || binary.LittleEndian.Uint32(rest) != code {
		t.Fatalf("%s: reply op %#x %q, want a binary error with code %d", what, op, rest, code)
	}
}

func u32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func u64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// binPublishBody is a binary publish of n chunks of blob 1 in namespace
// ns, with flags.
func binPublishBody(flags byte, ns string, n int) []byte {
	b := append(u32([]byte{binMagic, binPublish, flags}, uint32(len(ns))), ns...)
	b = u32(b, 0) // fingerprint
	b = u32(b, uint32(n))
	for range n {
		b = append(b, make([]byte, 32)...)
	}
	for range n {
		b = u64(b, 1)
	}
	return u32(b, 0) // nothing to create
}

// binLookupBody is a binary lookup of n chunks in namespace ns, with flags.
func binLookupBody(flags byte, ns string, n int) []byte {
	b := append(u32([]byte{binMagic, binLookup, flags}, uint32(len(ns))), ns...)
	b = u32(b, 0) // fingerprint
	b = u32(b, uint32(n))
	for range n {
		b = append(b, make([]byte, 32)...)
	}
	return u32(b, 0) // no pin
}

// Binary requests that cannot be decoded get a binary error reply naming
// the problem (code 1; an unknown op 6, before register 1), allocate
// nothing for counts the body cannot hold, and leave the connection
// serving: a good binary create afterwards succeeds and a JSON request
// too. No descriptor or goroutine is left behind.
func TestBadBinaryRequestsGetAnErrorReply(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, nil)
	r := rawDial(t, s)
	create := u64(u32([]byte{binMagic, binCreate}, 1), 4096)
	r.sendRaw(create)
	wantBinaryError(t, r, codeInvalid, "before register")
	r.register()
	for _, c := range []struct {
		what string
		body []byte
		code uint32
	}{
		{"no op", []byte{binMagic}, codeInvalid},
		{"unknown op", []byte{binMagic, 0x7f}, codeNotImplemented},
		{"a count the body cannot hold", u32([]byte{binMagic, binCreate}, math.MaxUint32), codeInvalid},
		{"a truncated create", u64(u32([]byte{binMagic, binCreate}, 2), 4096), codeInvalid},
		{"bytes after a create", append(create, 0), codeInvalid},
		{"a too large blob", u64(u32([]byte{binMagic, binCreate}, 1), 1<<40), codeNotEnoughMemory},
		{"a truncated publish", binPublishBody(0, "ns", 2)[:40], codeInvalid},
		{"unknown publish flags", binPublishBody(0x80, "ns", 1), codeInvalid},
		{"an empty namespace", binPublishBody(0, "", 1), codeInvalid},
		{"no chunks", binPublishBody(0, "ns", 0), codeInvalid},
		{"the groups flag without group keys", binPublishBody(binPublishGrp, "ns", 2), codeInvalid},
		{"a string longer than the body", u32([]byte{binMagic, binPublish, 0}, 1<<30), codeInvalid},
		{"a well-formed publish on a node without a cluster", binPublishBody(binPublishSeal, "ns", 1), codeNotImplemented},
		{"a truncated lookup", binLookupBody(0, "ns", 3)[:50], codeInvalid},
		{"unknown lookup flags", binLookupBody(binPublishSeal, "ns", 1), codeInvalid},
		{"a lookup without chunks", binLookupBody(0, "ns", 0), codeInvalid},
		{"a lookup with the groups flag but no keys", binLookupBody(binPublishGrp, "ns", 2), codeInvalid},
		{"a well-formed lookup on a node without a cluster", binLookupBody(0, "ns", 2), codeNotImplemented},
	} {
		r.sendRaw(c.body)
		wantBinaryError(t, r, c.code, c.what)
	}
	if st.Stats().Blobs != 0 {
		t.Fatalf("%d blobs after bad requests", st.Stats().Blobs)
	}
	r.sendRaw(create)
	op, rest := recvBinary(t, r)
	if op != binCreate|binReply || len(rest) != 4+binBlobRecord+4+8 || binary.LittleEndian.Uint32(rest) != 1 {
		t.Fatalf("binary create: op %#x, %d bytes", op, len(rest))
	}
	if st.Stats().Blobs != 1 {
		t.Fatalf("%d blobs after one binary create", st.Stats().Blobs)
	}
	// The segment's descriptor follows the reply: one byte and SCM_RIGHTS.
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := r.nc.ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("no descriptor after the binary create: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("descriptors %v, %v; want one", fds, err)
	}
	unix.Close(fds[0])
	if m := r.call(map[string]any{"type": "instance_status_request"}); m["type"] != "instance_status_reply" {
		t.Fatalf("JSON after binary requests: %v", m)
	}
	r.nc.Close() // the unsealed blob is freed with the connection
	serving(t, s)
}

// A Go client creating blobs in the binary framing and one speaking JSON
// get the same kind of blob: writable through the mapping, counted in the
// store, each segment's descriptor passed once.
func TestBinaryAndJSONCreatesAgree(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, nil)
	for _, useJSON := range []bool{false, true} {
		c, err := local.Dial(context.Background(), local.Config{Path: s.Path(), JSON: useJSON})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := c.CreateBlobs([]int64{1000, 70000, 4096})
		if err != nil || len(bs) != 3 {
			t.Fatalf("JSON %v: CreateBlobs: %d, %v", useJSON, len(bs), err)
		}
		for i, b := range bs {
			if b.Sealed || len(b.Data) != []int{1000, 70000, 4096}[i] {
				t.Fatalf("JSON %v: blob %d: sealed %v, %d bytes", useJSON, i, b.Sealed, len(b.Data))
			}
			b.Data[len(b.Data)-1] = byte(i + 1)
		}
		if c.Segments() == 0 {
			t.Fatalf("JSON %v: no segment mapped", useJSON)
		}
		if got := st.Stats().Blobs; got != 3 {
			t.Fatalf("JSON %v: %d blobs in the store, want 3", useJSON, got)
		}
		c.Close() // unsealed: freed
		testutil.Eventually(t, "the blobs to be freed", 10*time.Second, func() bool { return st.Stats().Blobs == 0 })
	}
}

// FuzzDecodeBinaryPublish: any body decodes to a publish (and a lookup) or
// an error reply (code 1), never a panic, and a decoded publish has one
// blob per id, each id 32 bytes.
func FuzzDecodeBinaryPublish(f *testing.F) {
	f.Add(binPublishBody(binPublishSeal|binPublishEat, "ns", 2)[2:])
	f.Add(binPublishBody(binPublishGrp, "ns", 1)[2:])
	f.Add(binPublishBody(binPublishCodes|binPublishEat, "ns", 1)[2:])
	f.Add(binLookupBody(binPublishGrp, "ns", 1)[2:])
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := decodeLookup(&binReader{sockwire.Reader{B: body}}); err == nil {
			for _, id := range req.Ids {
				if len(id) != 32 {
					t.Fatalf("a lookup id of %d bytes", len(id))
				}
			}
		} else if re, ok := err.(*replyError); !ok || re.Code != codeInvalid {
			t.Fatalf("lookup: error %v, want an error reply with code 1", err)
		}
		a, err := decodePublish(&binReader{sockwire.Reader{B: body}})
		if err != nil {
			if re, ok := err.(*replyError); !ok || re.Code != codeInvalid {
				t.Fatalf("error %v, want an error reply with code 1", err)
			}
			return
		}
		if len(a.ids) == 0 || len(a.ids) != len(a.blobs) || a.ref == nil || a.ref.Name == "" {
			t.Fatalf("decoded %d ids, %d blobs, ref %v", len(a.ids), len(a.blobs), a.ref)
		}
		for _, id := range a.ids {
			if len(id) != 32 {
				t.Fatalf("an id of %d bytes", len(id))
			}
		}
	})
}

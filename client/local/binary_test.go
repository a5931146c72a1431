package local

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// fakeNode serves one connection accepted on a listener the way a node of
// another build would: it reads each framed request, keeps its body, and
// writes the reply its answer function gives, framed (none for a nil
// reply). It stops at the connection's end or when the answer says stop;
// done is closed then.
type fakeNode struct {
	mu     sync.Mutex
	bodies [][]byte
	done   chan struct{}
}

// serveFake starts a fakeNode answering with answer on a new socket named
// name (closed when the test ends) and returns it and the socket's path.
func serveFake(t *testing.T, name string, answer func(body []byte) (rep []byte, stop bool)) (*fakeNode, string) {
	path := filepath.Join(testutil.SocketDir(t), name)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f := &fakeNode{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		for {
			var hdr [8]byte
			if _, err := io.ReadFull(nc, hdr[:]); err != nil {
				return
			}
			body := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
			if _, err := io.ReadFull(nc, body); err != nil {
				return
			}
			f.mu.Lock()
			f.bodies = append(f.bodies, body)
			f.mu.Unlock()
			rep, stop := answer(body)
			if stop {
				return
			}
			if rep == nil {
				continue
			}
			if _, err := nc.Write(append(binary.LittleEndian.AppendUint64(nil, uint64(len(rep))), rep...)); err != nil {
				return
			}
		}
	}()
	return f, path
}

// requests are the request bodies read so far.
func (f *fakeNode) requests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// firstBytes is the first byte of every request read so far ('{' for JSON,
// binMagic for the binary framing).
func (f *fakeNode) firstBytes() string {
	var b []byte
	for _, body := range f.requests() {
		b = append(b, body[0])
	}
	return string(b)
}

// oldNodeAnswer answers the way a node from before the binary framing
// does, for the requests a publish sends: register, a JSON error (code 1)
// for a body that is not JSON, kvring_publish_reply for a JSON publish.
func oldNodeAnswer(body []byte) ([]byte, bool) {
	var req map[string]any
	var rep any
	switch {
	case json.Unmarshal(body, &req) != nil:
		rep = map[string]any{"code": 1, "message": "the request is not a JSON object"}
	case req["type"] == "register_request":
		rep = map[string]any{"type": "register_reply", "instance_id": 3, "store_match": true}
	case req["type"] == "kvring_publish_request":
		ids, _ := req["ids"].([]any)
		results := make([]map[string]any, len(ids))
		for i, id := range ids {
			results[i] = map[string]any{"id": id, "status": "stored", "holders": []any{}}
		}
		rep = map[string]any{"type": "kvring_publish_reply", "epoch": 1, "results": results}
	default:
		rep = map[string]any{"code": 6, "message": "not implemented"}
	}
	b, _ := json.Marshal(rep)
	return b, false
}

// TestClientFallsBackToJSONForAnOldNode: a node that answers a binary
// publish with a JSON error gets the same publish again in JSON, and every
// later request on the connection in JSON, without the caller noticing.
func TestClientFallsBackToJSONForAnOldNode(t *testing.T) {
	t.Parallel()
	o, path := serveFake(t, "old.sock", oldNodeAnswer)
	c, err := Dial(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ns := Namespace{Name: "ns", Fingerprint: []byte{1, 2}}
	for i := range 2 {
		res, err := c.PublishAndDelete(ns, [][32]byte{{byte(i)}}, []uint64{1 << 63}, nil)
		if err != nil || len(res) != 1 || res[0].Status != "stored" {
			t.Fatalf("publish %d to an old node: %+v %v", i, res, err)
		}
	}
	c.Close()
	<-o.done
	// register (JSON), binary publish, the same in JSON, then JSON only, exit.
	if want, got := "{\xb1{{{", o.firstBytes(); got != want {
		t.Fatalf("first bytes of the requests %q, want %q", got, want)
	}
}

// TestClientDropsTheCodesFlagForANodeWithout: a node with the binary
// framing from before the per-chunk codes refuses the flag (binary error 1,
// "unknown flags"); the client sends the publish again without it, and
// without it from then on.
func TestClientDropsTheCodesFlagForANodeWithout(t *testing.T) {
	t.Parallel()
	f, path := serveFake(t, "nocodes.sock", func(body []byte) ([]byte, bool) {
		var rep []byte
		switch {
		case body[0] == '{':
			rep = []byte(`{"type": "register_reply", "instance_id": 3, "store_match": true}`)
		case body[1] == binPublish && body[2]&binPublishCodes != 0:
			msg := "binary publish: unknown flags 0x0b"
			rep = appendStr(binary.LittleEndian.AppendUint32([]byte{binMagic, binError}, 1), msg)
		case body[1] == binPublish:
			rep = binary.LittleEndian.AppendUint64([]byte{binMagic, binPublish | binReply}, 1)
			rep = binary.LittleEndian.AppendUint32(rep, 1)
			rep = append(rep, 0, 0)                                   // stored, not degraded
			rep = binary.LittleEndian.AppendUint32(rep, 0)            // reason
			rep = append(binary.LittleEndian.AppendUint32(rep, 0), 0) // holders, nothing created
		}
		return rep, false
	})
	c, err := Dial(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := Namespace{Name: "ns", Fingerprint: []byte{1, 2}}
	for i := range 2 {
		res, err := c.PublishAndDelete(ns, [][32]byte{{byte(i)}}, []uint64{1 << 63}, nil)
		if err != nil || len(res) != 1 || res[0].Status != "stored" || res[0].Code != 0 {
			t.Fatalf("publish %d: %+v %v", i, res, err)
		}
	}
	var flags []byte
	for _, body := range f.requests() {
		if body[0] == binMagic {
			flags = append(flags, body[2])
		}
	}
	eat := byte(binPublishEat)
	if want := []byte{eat | binPublishCodes, eat, eat}; string(flags) != string(want) {
		t.Fatalf("publish flags %x, want %x", flags, want)
	}
}

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

// oldNode serves a socket the way a node from before the binary framing
// does, for the requests a publish sends: register, a JSON error (code 1)
// for a body that is not JSON, kvring_publish_reply for a JSON publish. It
// records the first byte of every request body.
type oldNode struct {
	mu     sync.Mutex
	firsts []byte
}

func (o *oldNode) serve(l net.Listener) {
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
		o.mu.Lock()
		o.firsts = append(o.firsts, body[0])
		o.mu.Unlock()
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
		if _, err := nc.Write(append(binary.LittleEndian.AppendUint64(nil, uint64(len(b))), b...)); err != nil {
			return
		}
	}
}

// TestClientFallsBackToJSONForAnOldNode: a node that answers a binary
// publish with a JSON error gets the same publish again in JSON, and every
// later request on the connection in JSON, without the caller noticing.
func TestClientFallsBackToJSONForAnOldNode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testutil.SocketDir(t), "old.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o := &oldNode{}
	done := make(chan struct{})
	go func() { defer close(done); o.serve(l) }()
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
	<-done
	o.mu.Lock()
	defer o.mu.Unlock()
	// register (JSON), binary publish, the same in JSON, then JSON only, exit.
	if want := "{\xb1{{{"; string(o.firsts) != want {
		t.Fatalf("first bytes of the requests %q, want %q", o.firsts, want)
	}
}

// TestClientDropsTheCodesFlagForANodeWithout: a node with the binary
// framing from before the per-chunk codes refuses the flag (binary error 1,
// "unknown flags"); the client sends the publish again without it, and
// without it from then on.
func TestClientDropsTheCodesFlagForANodeWithout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testutil.SocketDir(t), "nocodes.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var flags []byte
	go func() {
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
			if body[0] == binMagic {
				mu.Lock()
				flags = append(flags, body[2])
				mu.Unlock()
			}
			if _, err := nc.Write(append(binary.LittleEndian.AppendUint64(nil, uint64(len(rep))), rep...)); err != nil {
				return
			}
		}
	}()
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
	mu.Lock()
	defer mu.Unlock()
	eat := byte(binPublishEat)
	if want := []byte{eat | binPublishCodes, eat, eat}; string(flags) != string(want) {
		t.Fatalf("publish flags %x, want %x", flags, want)
	}
}

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
	path := filepath.Join(t.TempDir(), "old.sock")
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

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

// TestClientGetsInJSONFromANodeWithoutTheBinaryGet: a node with the binary
// framing from before the binary get answers op 4 with binary error 6; the
// client gets in JSON instead, and from then on, and releases in JSON
// (never in the binary release that node would not know either).
func TestClientGetsInJSONFromANodeWithoutTheBinaryGet(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testutil.SocketDir(t), "preget.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var firsts []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
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
			mu.Lock()
			firsts = append(firsts, body[0])
			mu.Unlock()
			var rep []byte
			var req map[string]any
			switch {
			case body[0] == binMagic:
				rep = appendStr(binary.LittleEndian.AppendUint32([]byte{binMagic, binError}, 6), "binary op 0x04 is not implemented")
			case json.Unmarshal(body, &req) != nil:
				return
			case req["type"] == "register_request":
				rep = []byte(`{"type": "register_reply", "instance_id": 3, "store_match": true}`)
			case req["type"] == "kvring_get_request":
				rep = []byte(`{"type": "kvring_get_reply", "payloads": [], "results": [{"id": "00", "found": false, "reason": "not held"}]}`)
			case req["type"] == "kvring_release_request":
				ids, _ := req["ids"].([]any)
				rep, _ = json.Marshal(map[string]any{"type": "kvring_release_reply", "released": len(ids)})
			default:
				continue // exit_request: no reply
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
	ns := Namespace{Name: "ns", Fingerprint: []byte{1, 2}}
	for i := range 2 {
		res, err := c.GetChunks(ns, [][32]byte{{byte(i)}}, nil)
		if err != nil || len(res) != 1 || res[0].Found || res[0].Reason != "not held" {
			t.Fatalf("get %d from a node without the binary get: %+v %v", i, res, err)
		}
	}
	if err := c.ReleaseLater([]uint64{1<<63 | 5}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close (the release in JSON): %v", err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	// register, binary get (refused), the same in JSON, the next in JSON,
	// the release in JSON, exit.
	if want := "{\xb1{{{{"; string(firsts) != want {
		t.Fatalf("first bytes of the requests %q, want %q", firsts, want)
	}
}

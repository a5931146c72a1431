package local

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// TestClientGetsInJSONFromANodeWithoutTheBinaryGet: a node with the binary
// framing from before the binary get answers op 4 with binary error 6; the
// client gets in JSON instead, and from then on, and releases in JSON
// (never in the binary release that node would not know either).
func TestClientGetsInJSONFromANodeWithoutTheBinaryGet(t *testing.T) {
	t.Parallel()
	f, path := serveFake(t, "preget.sock", func(body []byte) ([]byte, bool) {
		var req map[string]any
		switch {
		case body[0] == binMagic:
			return appendStr(binary.LittleEndian.AppendUint32([]byte{binMagic, binError}, 6), "binary op 0x04 is not implemented"), false
		case json.Unmarshal(body, &req) != nil:
			return nil, true
		case req["type"] == "register_request":
			return []byte(`{"type": "register_reply", "instance_id": 3, "store_match": true}`), false
		case req["type"] == "kvring_get_request":
			return []byte(`{"type": "kvring_get_reply", "payloads": [], "results": [{"id": "00", "found": false, "reason": "not held"}]}`), false
		case req["type"] == "kvring_release_request":
			ids, _ := req["ids"].([]any)
			rep, _ := json.Marshal(map[string]any{"type": "kvring_release_reply", "released": len(ids)})
			return rep, false
		}
		return nil, false // exit_request: no reply
	})
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
	<-f.done
	// register, binary get (refused), the same in JSON, the next in JSON,
	// the release in JSON, exit.
	if want, got := "{\xb1{{{{", f.firstBytes(); got != want {
		t.Fatalf("first bytes of the requests %q, want %q", got, want)
	}
}

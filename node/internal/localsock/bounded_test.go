package localsock

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// blobIDsArray is a get_buffers_request carrying n blob ids (bit 63 set:
// 19 digits each) as an "ids" array, as v6d's Go client sends them.
func blobIDsArray(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"get_buffers_request","unsafe":false,"ids":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(1<<63|uint64(i)*7919, 10))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// blobIDsIndexed is the same request under keys "0".."n-1" with "num", as
// v6d's C++ client sends it (keys in sorted order, as nlohmann::json writes
// them).
func blobIDsIndexed(n int) []byte {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	slices.Sort(keys) // as strings: "0", "1", "10", "100", ...
	var b bytes.Buffer
	b.WriteByte('{')
	for _, k := range keys {
		i, _ := strconv.Atoi(k)
		b.WriteString(`"` + k + `":` + strconv.FormatUint(1<<63|uint64(i)*7919, 10) + ",")
	}
	b.WriteString(`"num":` + strconv.Itoa(n) + `,"type":"get_buffers_request","unsafe":false}`)
	return b.Bytes()
}

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc).
// The test is not parallel: nothing else in the package runs meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Decoding a request allocates in proportion to its frame: a million blob
// ids (21 MiB as an array, 30 MiB under index keys) cost the ids' 8 bytes
// each and little else, where the whole body used to be copied into a map
// of raw messages and then one raw message per id (1.4 GiB for a 32 MiB
// request). A 32 MiB request of more ids than MaxIDsPerRequest is refused
// while it is scanned, before anything is allocated for its ids.
func TestRequestDecodingIsBoundedByTheFrame(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"array", blobIDsArray(MaxIDsPerRequest)},
		{"index keys", blobIDsIndexed(MaxIDsPerRequest)},
	} {
		var ids []uint64
		var err error
		n := allocated(func() {
			var r request
			if r, err = parseRequest(c.body); err == nil {
				ids, err = requestedIDs(r)
			}
		})
		if err != nil {
			t.Fatalf("%s: a request of %d ids (%d bytes): %v", c.name, MaxIDsPerRequest, len(c.body), err)
		}
		if len(ids) != MaxIDsPerRequest || ids[3] != 1<<63|3*7919 {
			t.Fatalf("%s: decoded %d ids (ids[3] = %d)", c.name, len(ids), ids[3])
		}
		t.Logf("%s: %d ids in %.1f MiB decoded with %.1f MiB allocated (%.2f× the frame)", c.name, len(ids),
			float64(len(c.body))/(1<<20), float64(n)/(1<<20), float64(n)/float64(len(c.body)))
		if n > uint64(len(c.body)) {
			t.Errorf("%s: decoding allocated %d bytes for a %d-byte frame; want at most the frame's length", c.name, n, len(c.body))
		}
	}

	big := blobIDsArray(32 << 20 / 20) // 32 MiB
	var err error
	n := allocated(func() {
		var r request
		if r, err = parseRequest(big); err == nil {
			_, err = requestedIDs(r)
		}
	})
	t.Logf("a %.1f MiB request of %d ids: %v, %.2f MiB allocated", float64(len(big))/(1<<20), 32<<20/20, err, float64(n)/(1<<20))
	var re *replyError
	if !errors.As(err, &re) || re.Code != codeInvalid {
		t.Fatalf("a request of too many ids: %v, want an error reply with code %d", err, codeInvalid)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(MaxIDsPerRequest)) {
		t.Errorf("the refusal %q does not name the limit", err)
	}
	if n > 1<<20 {
		t.Errorf("refusing a %d-byte request allocated %d bytes; want under 1 MiB", len(big), n)
	}
}

// The same 32 MiB request sent to a server gets an error reply naming the
// limit, the connection keeps serving, and the whole request (reading the
// frame, decoding it, answering) allocates at most twice the frame.
func TestA32MiBRequestIsRefusedAndTheConnectionKeepsServing(t *testing.T) {
	s := startServer(t, testStore(t, 16<<20), nil)
	rc := rawDial(t, s)
	rc.register()
	big := blobIDsArray(32 << 20 / 20)
	var m map[string]any
	n := allocated(func() {
		rc.sendRaw(big)
		var err error
		// A bound on a hang: under the race detector the scan is slow.
		if m, err = recvWithin(rc, 2*time.Minute); err != nil {
			t.Errorf("no reply to a 32 MiB request: %v", err)
		}
	})
	wantCode(t, m, codeInvalid)
	t.Logf("a %.1f MiB get_buffers_request: %v; %.1f MiB allocated by client and server (%.2f× the frame)",
		float64(len(big))/(1<<20), m["message"], float64(n)/(1<<20), float64(n)/float64(len(big)))
	// The client's copy of the frame is one length; the server's read buffer
	// less than two (it doubles up to the frame's length), and decoding
	// nothing more.
	if n > 3*uint64(len(big)) {
		t.Errorf("the request allocated %d bytes in all for a %d-byte frame; want at most 3× (1× the client's copy, 2× the server's read buffer)", n, len(big))
	}
	if m := rc.call(map[string]any{"type": "get_buffers_request", "ids": []uint64{1<<63 | 5}}); m["type"] != "get_buffers_reply" {
		t.Fatalf("the connection does not serve after the refusal: %v", m)
	}
	// A request past its type's size limit is refused the same way.
	long := `{"type":"exists_request","id":1,"pad":"` + strings.Repeat("x", maxSmallRequestBytes) + `"}`
	wantCode(t, rc.call(rawBody([]byte(long))), codeInvalid)
}

// recvWithin reads one reply as rawConn.recv does, with a longer deadline.
func recvWithin(r *rawConn, d time.Duration) (map[string]any, error) {
	r.nc.SetReadDeadline(time.Now().Add(d))
	var hdr [8]byte
	if _, err := io.ReadFull(r.nc, hdr[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
	if _, err := io.ReadFull(r.nc, body); err != nil {
		return nil, err
	}
	d2 := json.NewDecoder(bytes.NewReader(body))
	d2.UseNumber()
	var m map[string]any
	return m, d2.Decode(&m)
}

// rawBody makes rawConn.call send its bytes as they are.
type rawBody []byte

func (b rawBody) MarshalJSON() ([]byte, error) { return b, nil }

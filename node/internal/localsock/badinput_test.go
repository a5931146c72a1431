package localsock

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
)

// leakCheck records the goroutine and descriptor counts now and, at the end
// of the test (after the test's own cleanups registered later have run),
// waits until both are back: no connection may leave a goroutine or a
// descriptor behind. It must be called before the server is started.
func leakCheck(t *testing.T) {
	t.Helper()
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)
	t.Cleanup(func() {
		testutil.Eventually(t, "goroutines and descriptors back to their counts before the test", 10*time.Second, func() bool {
			return runtime.NumGoroutine() <= g0 && openFDs(t) <= fd0
		})
	})
}

// serving checks the server still answers a fresh client.
func serving(t *testing.T, s *Server) {
	t.Helper()
	c, err := local.Dial(context.Background(), local.Config{Path: s.Path()})
	if err != nil {
		t.Fatalf("the server no longer serves: %v", err)
	}
	defer c.Close()
	if _, err := c.InstanceStatus(); err != nil {
		t.Fatalf("the server no longer serves: %v", err)
	}
}

// Garbage bytes: a length that is far over the limit gets an error reply
// and the connection is closed (the stream cannot be resynchronised); a
// body that is not JSON gets an error reply and the connection serves on.
func TestGarbageBytesGetAnErrorReply(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	r := rawDial(t, s)
	r.nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	m, err := r.recv()
	if err != nil {
		t.Fatalf("no error reply to garbage: %v", err)
	}
	wantCode(t, m, codeInvalid)
	if _, err := r.recv(); err == nil {
		t.Fatal("the connection stayed open after an unreadable frame")
	}
	r2 := rawDial(t, s)
	r2.sendRaw([]byte("\x00\xff garbage \x01"))
	wantCode(t, mustRecv(t, r2), codeInvalid)
	r2.register()
	serving(t, s)
}

func mustRecv(t *testing.T, r *rawConn) map[string]any {
	t.Helper()
	m, err := r.recv()
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return m
}

// A frame longer than 256 MiB is refused before any of it is read.
func TestFrameOver256MiBIsRefused(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	r := rawDial(t, s)
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], MaxMessageBytes+1)
	r.nc.Write(hdr[:])
	m := mustRecv(t, r)
	wantCode(t, m, codeInvalid)
	if _, err := r.recv(); err == nil {
		t.Fatal("the connection stayed open after an overlong frame")
	}
	serving(t, s)
}

// A truncated frame (the client goes away in the middle of one) frees the
// connection and what it held.
func TestTruncatedFrameFreesTheConnection(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, nil)
	c := dial(t, s)
	if _, err := c.CreateBlob(4096); err != nil { // unsealed: freed with the connection
		t.Fatal(err)
	}
	r := rawDial(t, s)
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 100)
	r.nc.Write(append(hdr[:], `{"type": "regis`...))
	r.nc.Close()
	c.Close()
	testutil.Eventually(t, "the connections to go", 10*time.Second, func() bool { return s.Connections() == 0 })
	if st.Stats().Blobs != 0 {
		t.Fatalf("%d blobs left after the connections went", st.Stats().Blobs)
	}
	serving(t, s)
}

// JSON that is not an object, and an object without a string type, get
// error replies; the connection keeps serving.
func TestJSONThatIsNotAnObject(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	r := rawDial(t, s)
	for _, body := range []string{`[1, 2]`, `"register_request"`, `42`, `null`, `{"type": 5}`, `{}`, `{"type": "x"`, ``} {
		r.sendRaw([]byte(body))
		wantCode(t, mustRecv(t, r), codeInvalid)
	}
	r.register()
	if m := r.call(map[string]any{"type": "instance_status_request"}); m["type"] != "instance_status_reply" {
		t.Fatalf("after bad requests: %v", m)
	}
}

// Ids sent as floats, strings, negatives or out of range are refused with
// an error naming the field, never rounded.
func TestIDsAsFloatsOrStringsAreRefused(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	r := rawDial(t, s)
	r.register()
	for _, id := range []string{`1.5`, `1e3`, `"9223372036854775809"`, `-1`, `18446744073709551616`, `true`, `[1]`, `9.223372036854775809e18`} {
		r.sendRaw([]byte(`{"type": "seal_request", "object_id": ` + id + `}`))
		m := mustRecv(t, r)
		wantCode(t, m, codeInvalid)
		if msg, _ := m["message"].(string); !contains(msg, "object_id") {
			t.Fatalf("error %q does not name the field", msg)
		}
	}
	r.sendRaw([]byte(`{"type": "get_buffers_request", "ids": [9223372036854775809, 1.5]}`))
	wantCode(t, mustRecv(t, r), codeInvalid)
	// The largest id is exact: unknown, so 12, not a rounding error.
	r.sendRaw([]byte(`{"type": "seal_request", "object_id": 18446744073709551615}`))
	wantCode(t, mustRecv(t, r), codeObjectNotExists)
}

func contains(s, sub string) bool { return len(sub) == 0 || len(s) >= len(sub) && indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// Fields of the wrong type get an error naming the field.
func TestWrongFieldTypes(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	r := rawDial(t, s)
	r.register()
	for _, c := range []struct{ body, field string }{
		{`{"type": "create_buffer_request", "size": "big"}`, "size"},
		{`{"type": "create_buffer_request"}`, "size"},
		{`{"type": "create_buffers_request", "num": 2, "sizes": [1, "2"]}`, "sizes"},
		{`{"type": "create_buffers_request", "num": 3, "sizes": [1, 2]}`, "num"},
		{`{"type": "get_buffers_request", "ids": "all"}`, "ids"},
		{`{"type": "get_buffers_request", "ids": [], "unsafe": "yes"}`, "unsafe"},
		{`{"type": "put_name_request", "object_id": 1, "name": 5}`, "name"},
		{`{"type": "create_data_request", "content": [1]}`, "content"},
		{`{"type": "del_data_request", "id": [1], "deep": 1}`, "deep"},
		{`{"type": "list_name_request", "pattern": "[", "regex": false}`, "pattern"},
		{`{"type": "list_name_request", "pattern": "(", "regex": true}`, "pattern"},
	} {
		r.sendRaw([]byte(c.body))
		m := mustRecv(t, r)
		if _, typed := m["type"]; typed {
			t.Fatalf("%s: reply %v, want an error", c.body, m)
		}
		if msg, _ := m["message"].(string); !contains(msg, c.field) {
			t.Fatalf("%s: error %q does not name %q", c.body, msg, c.field)
		}
	}
	serving(t, s)
}

// Any request before register gets an error reply; register then works.
func TestRequestBeforeRegister(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, nil)
	r := rawDial(t, s)
	wantCode(t, r.call(map[string]any{"type": "create_buffer_request", "size": 4096}), codeInvalid)
	wantCode(t, r.call(map[string]any{"type": "instance_status_request"}), codeInvalid)
	if st.Stats().Blobs != 0 {
		t.Fatal("a blob was created before register")
	}
	r.register()
	if m := r.call(map[string]any{"type": "instance_status_request"}); m["type"] != "instance_status_reply" {
		t.Fatalf("after register: %v", m)
	}
}

// Seal of an unknown id is 12, of a sealed one 13; drop of an unknown id
// is 12 and of a sealed one 13.
func TestSealOfUnknownOrSealedBlob(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	c := dial(t, s)
	wantErrCode(t, c.Seal(0x8000000000000123), codeObjectNotExists)
	b, err := c.CreateBlob(100)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	wantErrCode(t, c.Seal(b.ID), codeObjectSealed)
	wantErrCode(t, c.Drop(b.ID), codeObjectSealed)
	wantErrCode(t, c.Drop(0x8000000000000123), codeObjectNotExists)
}

// get_buffers of an unsealed blob is 14 unless unsafe.
func TestGetOfUnsealedBlobNeedsUnsafe(t *testing.T) {
	leakCheck(t)
	s := startServer(t, testStore(t, 16<<20), nil)
	w := dial(t, s)
	b, err := w.CreateBlob(100)
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Data, "partial")
	r := dial(t, s)
	_, err = r.GetBlobs([]uint64{b.ID}, false)
	wantErrCode(t, err, codeObjectNotSealed)
	bs, err := r.GetBlobs([]uint64{b.ID}, true)
	if err != nil || len(bs) != 1 || bs[0].Sealed || string(bs[0].Data[:7]) != "partial" {
		t.Fatalf("unsafe get: %v %v", bs, err)
	}
}

// A client that disconnects with unsealed blobs has them freed; one that
// disconnects holding references has them released, so a deleted blob's
// memory is freed once the last holder goes.
func TestDisconnectFreesUnsealedBlobsAndReleasesReferences(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, nil)
	a := dial(t, s)
	if _, err := a.CreateBlob(64 << 10); err != nil {
		t.Fatal(err)
	}
	kept, err := a.CreateBlob(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Seal(kept.ID); err != nil {
		t.Fatal(err)
	}
	b := dial(t, s)
	if _, err := b.GetBlobs([]uint64{kept.ID}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.IncreaseRefs([]uint64{kept.ID}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	testutil.Eventually(t, "the unsealed blob to be freed", 10*time.Second, func() bool { return st.Stats().Blobs == 1 })
	c := dial(t, s)
	if err := c.Delete(kept.ID); err != nil {
		t.Fatal(err)
	}
	if st.Stats().Blobs != 1 {
		t.Fatal("a blob another client references was freed at delete")
	}
	if bs, err := c.GetBlobs([]uint64{kept.ID}, false); err != nil || len(bs) != 0 {
		t.Fatalf("a deleted blob is still visible: %v %v", bs, err)
	}
	b.Close()
	testutil.Eventually(t, "the deleted blob to be freed with its last reference", 10*time.Second, func() bool {
		return st.Stats().Blobs == 0 && st.Stats().UsedBytes == 0
	})
}

// 1,000 connections at once each register, create a blob and ask for the
// status; when they go, every goroutine, descriptor and slot is back.
func TestAThousandConnectionsAtOnce(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 256<<20)
	s := startServer(t, st, nil)
	const n = 1000
	clients := make([]*local.Client, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range clients {
		wg.Go(func() {
			c, err := local.Dial(context.Background(), local.Config{Path: s.Path()})
			if err != nil {
				errs <- err
				return
			}
			clients[i] = c
			if _, err := c.CreateBlob(4096); err != nil {
				errs <- err
				return
			}
			if _, err := c.InstanceStatus(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := s.Connections(); got != n {
		t.Fatalf("%d connections served, want %d", got, n)
	}
	if got := st.Stats().Blobs; got != n {
		t.Fatalf("%d blobs, want %d", got, n)
	}
	for _, c := range clients {
		c.Close()
	}
	testutil.Eventually(t, "every connection to go", 20*time.Second, func() bool { return s.Connections() == 0 })
	if st.Stats().Blobs != 0 || st.Stats().UsedBytes != 0 {
		t.Fatalf("after the connections went: %+v", st.Stats())
	}
}

// A client that never reads its replies is disconnected after the write
// timeout, its references are released, and others are served meanwhile.
func TestClientThatNeverReadsIsDisconnected(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
	w := dial(t, s)
	b, err := w.CreateBlob(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(b.ID); err != nil {
		t.Fatal(err)
	}
	r := rawDial(t, s)
	r.register()
	// One request whose reply (about 4 MB) is far larger than the socket's
	// buffer, and it is never read.
	ids := make([]uint64, 20000)
	for i := range ids {
		ids[i] = b.ID
	}
	req, _ := json.Marshal(map[string]any{"type": "get_buffers_request", "ids": ids})
	r.sendRaw(req)
	serving(t, s)
	// The bound is on a hang: building the 4 MB reply takes seconds on a
	// loaded machine under the race detector before the write can time out.
	testutil.Eventually(t, "the client that does not read to be disconnected", time.Minute, func() bool {
		return s.Connections() == 1 // w
	})
	if err := w.Delete(b.ID); err != nil {
		t.Fatal(err)
	}
	if st.Stats().Blobs != 0 {
		t.Fatal("the references of the disconnected client were not released")
	}
}

// TestAFrameCutShortIsDroppedAfterFrameTimeout: a frame whose rest does
// not arrive closes the connection after FrameTimeout (the node sets its
// read deadline whenever a frame is not already read whole), while whole
// frames before it were answered.
func TestAFrameCutShortIsDroppedAfterFrameTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, testStore(t, 16<<20), func(c *Config) { c.FrameTimeout = 100 * time.Millisecond })
	r := rawDial(t, s)
	r.register()
	status := []byte(`{"type": "instance_status_request"}`)
	msg := append(u64(nil, uint64(len(status))), status...)
	msg = append(u64(msg, 100), "only ten b"...) // 10 of 100 bytes
	if _, err := r.nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	if m, err := r.recv(); err != nil || m["type"] != "instance_status_reply" {
		t.Fatalf("reply to the whole frame: %v %v", m, err)
	}
	start := time.Now()
	if m, err := r.recv(); err == nil {
		t.Fatalf("a reply %v to a frame cut short", m)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the connection was closed %v after the frame began, want about the frame timeout", d)
	}
}

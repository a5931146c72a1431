package localsock

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
)

// A blob written through the client's mapping is read back byte-exact by a
// second connection; used bytes grow by the blob at create and stay after
// seal; instance_status reports them.
func TestBlobRoundTripCountsInMemory(t *testing.T) {
	st := testStore(t, 64<<20)
	s := startServer(t, st, nil)
	w := dial(t, s)
	before := st.Stats().UsedBytes
	b, err := w.CreateBlob(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Stats().UsedBytes; got < before+1<<20 {
		t.Fatalf("used bytes %d after create, want >= %d", got, before+1<<20)
	}
	for i := range b.Data {
		b.Data[i] = byte(i * 7)
	}
	if err := w.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	status, err := w.InstanceStatus()
	if err != nil {
		t.Fatal(err)
	}
	if status.MemoryUsage < 1<<20 || status.MemoryLimit != 64<<20 || status.InstanceID != 7 || status.IPCConnections != 1 {
		t.Fatalf("instance status %+v", status)
	}
	r := dial(t, s)
	got, err := r.GetBlobs([]uint64{b.ID, 0x8000000000000abc}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Sealed || !bytes.Equal(got[0].Data, b.Data) {
		t.Fatalf("get_buffers: %d blobs, want the one blob byte-exact", len(got))
	}
	if err := r.Release(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(b.ID); err != nil {
		t.Fatal(err)
	}
	if st.Stats().BlobBytes != 0 {
		t.Fatalf("blob bytes %d after delete, want 0", st.Stats().BlobBytes)
	}
}

// A segment's descriptor is sent once per connection: the second blob in
// the same segment comes without one (the client would otherwise read the
// wrong bytes as the next reply).
func TestSegmentDescriptorSentOncePerConnection(t *testing.T) {
	st := testStore(t, 64<<20)
	s := startServer(t, st, nil)
	c := dial(t, s)
	for range 5 {
		if _, err := c.CreateBlob(64 << 10); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := c.CreateBlobs([]int64{64 << 10, 64 << 10, 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 || bs[2].ID != emptyBlobID {
		t.Fatalf("create_buffers: %+v", bs)
	}
	if c.Segments() != 1 {
		t.Fatalf("%d segments mapped, want 1", c.Segments())
	}
	if _, err := c.InstanceStatus(); err != nil {
		t.Fatalf("the connection is out of step: %v", err)
	}
}

// Every message of the table answers with its reply type; messages kvring
// does not implement answer code 6 and the connection stays up.
func TestEveryMessageAnswers(t *testing.T) {
	st := testStore(t, 64<<20)
	s := startServer(t, st, nil)
	r := rawDial(t, s)
	r.register()
	m := r.call(map[string]any{"type": "create_buffer_request", "size": 4096})
	if m["type"] != "create_buffer_reply" {
		t.Fatalf("create_buffer: %v", m)
	}
	// Receive the descriptor so the stream stays in step.
	buf, oob := make([]byte, 1), make([]byte, 64)
	if _, oobn, _, _, err := r.nc.ReadMsgUnix(buf, oob); err != nil || oobn == 0 {
		t.Fatalf("no descriptor after create_buffer: %v", err)
	}
	id, _ := m["id"].(json.Number).Int64()
	blobID := uint64(id)
	_ = blobID
	idNum := m["id"]
	created := m["created"].(map[string]any)
	for _, k := range []string{"object_id", "store_fd", "data_offset", "data_size", "map_size", "pointer"} {
		if _, ok := created[k]; !ok {
			t.Fatalf("payload without %q: %v", k, created)
		}
	}
	steps := []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"type": "seal_request", "object_id": idNum}, "seal_reply"},
		{map[string]any{"type": "get_buffers_request", "ids": []any{idNum}}, "get_buffers_reply"},
		{map[string]any{"type": "get_buffers_request", "num": 1, "0": idNum}, "get_buffers_reply"},
		{map[string]any{"type": "increase_reference_count_request", "ids": []any{idNum}}, "increase_reference_count_reply"},
		{map[string]any{"type": "release_request", "id": idNum}, "release_reply"},
		{map[string]any{"type": "exists_request", "id": idNum}, "exists_reply"},
		{map[string]any{"type": "if_persist_request", "id": idNum}, "if_persist_reply"},
		{map[string]any{"type": "get_data_request", "id": []any{idNum}, "sync_remote": false, "wait": false}, "get_data_reply"},
		{map[string]any{"type": "list_data_request", "pattern": "vineyard::Blob", "regex": false, "limit": 10}, "get_data_reply"},
		{map[string]any{"type": "create_data_request", "content": map[string]any{"typename": "vineyard::Tensor", "instance_id": 7,
			"buffer_": map[string]any{"id": "o" + strings.Repeat("0", 16)}}}, "create_data_reply"},
		{map[string]any{"type": "instance_status_request"}, "instance_status_reply"},
		{map[string]any{"type": "cluster_meta"}, "cluster_meta"},
		{map[string]any{"type": "list_name_request", "pattern": "*", "regex": false, "limit": 10}, "list_name_reply"},
		{map[string]any{"type": "drop_name_request", "name": "nobody"}, "drop_name_reply"},
	}
	for _, s := range steps {
		if m := r.call(s.req); m["type"] != s.want {
			t.Fatalf("%v: reply %v, want %s", s.req["type"], m, s.want)
		}
	}
	// get_buffers twice on this connection: the segment was passed with
	// create_buffer, so no descriptor followed. A metadata object: persist,
	// name, find, list, drop.
	m = r.call(map[string]any{"type": "create_data_request", "content": map[string]any{"typename": "vineyard::Tensor", "instance_id": 7}})
	oid := m["id"]
	for _, s := range []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"type": "persist_request", "id": oid}, "persist_reply"},
		{map[string]any{"type": "put_name_request", "object_id": oid, "name": "tensor-a"}, "put_name_reply"},
		{map[string]any{"type": "get_name_request", "name": "tensor-a", "wait": false}, "get_name_reply"},
		{map[string]any{"type": "del_data_request", "id": []any{oid}, "fastpath": true}, "del_data_reply"},
	} {
		if m := r.call(s.req); m["type"] != s.want {
			t.Fatalf("%v: reply %v, want %s", s.req["type"], m, s.want)
		}
	}
	if m := r.call(map[string]any{"type": "list_name_request", "pattern": "tensor-*"}); m["size"] != json.Number("1") {
		t.Fatalf("list_name: %v", m)
	}
	wantCode(t, r.call(map[string]any{"type": "persist_request", "id": idNum}), codeAssertionFailed)
	wantCode(t, r.call(map[string]any{"type": "put_name_request", "object_id": idNum, "name": "b"}), codeObjectIsBlob)
	wantCode(t, r.call(map[string]any{"type": "get_name_request", "name": "nobody", "wait": false}), codeObjectNotExists)
	wantCode(t, r.call(map[string]any{"type": "create_stream_request", "object_id": 1}), codeNotImplemented)
	wantCode(t, r.call(map[string]any{"type": "migrate_object_request"}), codeNotImplemented)
	if m := r.call(map[string]any{"type": "exists_request", "id": 12345}); m["exists"] != false {
		t.Fatalf("exists of an unknown id: %v", m)
	}
	// exit: no reply, the server closes.
	r.send(map[string]any{"type": "exit_request"})
	if _, err := r.recv(); err == nil {
		t.Fatal("a reply to exit_request")
	}
}

// get_data of a blob id synthesises its metadata; list_data lists sealed
// blobs under vineyard::Blob.
func TestBlobMetadata(t *testing.T) {
	st := testStore(t, 64<<20)
	s := startServer(t, st, nil)
	c := dial(t, s)
	b, err := c.CreateBlob(100)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Content map[string]map[string]any `json:"content"`
	}
	if err := c.Call(map[string]any{"type": "get_data_request", "id": []uint64{b.ID}}, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Content) != 0 {
		t.Fatalf("get_data of an unsealed blob: %v", r.Content)
	}
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(map[string]any{"type": "list_data_request", "pattern": "vineyard::Blob", "regex": false, "limit": 5}, &r); err != nil {
		t.Fatal(err)
	}
	tree := r.Content[objectName(b.ID)]
	if tree == nil || tree["typename"] != "vineyard::Blob" || tree["length"] != float64(100) || tree["instance_id"] != float64(7) {
		t.Fatalf("list_data: %v", r.Content)
	}
}

// A stale socket file is replaced; a live one is an error naming the path;
// the mode is applied and Close removes the file.
func TestSocketFileLifecycle(t *testing.T) {
	st := testStore(t, 16<<20)
	path := filepath.Join(testutil.SocketDir(t), "v.sock")
	// A stale socket: bound, then its listener gone without removing it.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	s, err := Listen(Config{Path: path, Store: st, Mode: 0o600})
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	if _, err := Listen(Config{Path: path, Store: st}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a live socket: %v, want an error naming %s", err, path)
	}
	s.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file after Close: %v", err)
	}
	other := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(other, nil, 0o600)
	if _, err := Listen(Config{Path: other, Store: st}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a plain file: %v", err)
	}
}

// A blob that cannot be placed is error 41 NotEnoughMemory, and nothing is
// reserved.
func TestBlobOverTheLimitIsNotEnoughMemory(t *testing.T) {
	st := testStore(t, 4<<20)
	s := startServer(t, st, nil)
	c := dial(t, s)
	if _, err := c.CreateBlob(3 << 20); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateBlob(2 << 20)
	wantErrCode(t, err, codeNotEnoughMemory)
	_, err = c.CreateBlobs([]int64{1 << 10, 8 << 20})
	wantErrCode(t, err, codeNotEnoughMemory)
	if got := st.Stats().Blobs; got != 1 {
		t.Fatalf("%d blobs after failed creates, want 1", got)
	}
	var _ = local.ErrClosed
}

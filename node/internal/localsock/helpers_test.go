package localsock

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

// testStore opens a store with its segments in a fresh /dev/shm directory
// (removed at the end of the test).
func testStore(t testing.TB, limit int64) *store.Store {
	t.Helper()
	shm := testutil.ShmDir(t, "localsock-")
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: shm, MemoryLimit: limit,
		MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startServer serves a socket in t.TempDir() over st until the test ends.
func startServer(t testing.TB, st *store.Store, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{Path: filepath.Join(testutil.SocketDir(t), "kvring.sock"), Store: st, InstanceID: 7,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func dial(t testing.TB, s *Server) *local.Client {
	t.Helper()
	c, err := local.Dial(context.Background(), local.Config{Path: s.Path()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a connection that speaks frames by hand, for bad input.
type rawConn struct {
	t  testing.TB
	nc *net.UnixConn
}

func rawDial(t testing.TB, s *Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc.(*net.UnixConn)}
}

func (r *rawConn) sendRaw(body []byte) {
	r.t.Helper()
	msg := make([]byte, 8+len(body))
	binary.LittleEndian.PutUint64(msg, uint64(len(body)))
	copy(msg[8:], body)
	if _, err := r.nc.Write(msg); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) send(v any) {
	r.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendRaw(b)
}

// recv reads one reply; errors (EOF) are returned.
func (r *rawConn) recv() (map[string]any, error) {
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [8]byte
	if _, err := io.ReadFull(r.nc, hdr[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
	if _, err := io.ReadFull(r.nc, body); err != nil {
		return nil, err
	}
	var m map[string]any
	d := json.NewDecoder(bytesReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

func (r *rawConn) call(v any) map[string]any {
	r.t.Helper()
	r.send(v)
	m, err := r.recv()
	if err != nil {
		r.t.Fatalf("no reply to %v: %v", v, err)
	}
	return m
}

func (r *rawConn) register() {
	r.t.Helper()
	if m := r.call(map[string]any{"type": "register_request", "version": "0.7.2", "store_type": "Normal"}); m["type"] != "register_reply" {
		r.t.Fatalf("register: %v", m)
	}
}

// wantCode checks that m is an error reply with code.
func wantCode(t testing.TB, m map[string]any, code int) {
	t.Helper()
	if _, isTyped := m["type"]; isTyped || m["code"] != json.Number(itoa(code)) {
		t.Fatalf("reply %v, want error code %d", m, code)
	}
}

// wantErrCode checks that err is an error reply with code.
func wantErrCode(t testing.TB, err error, code int) {
	t.Helper()
	var e *local.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error %v, want an error reply with code %d", err, code)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

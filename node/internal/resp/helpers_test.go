package resp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/tenant"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// testStore opens a store with its segments in a fresh /dev/shm directory
// of the run's scratch (removed at the end of the test, or of a killed run).
func testStore(t testing.TB, limit int64) *store.Store {
	t.Helper()
	shm := testutil.ShmDir(t, "resp-")
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: shm, MemoryLimit: limit,
		MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fakeCluster is a one-node cluster: every chunk is this node's, sealed in
// its store from the value's blob (as the coordinator does when the node
// owns a chunk). reject, when set, decides a key's write instead.
type fakeCluster struct {
	st *store.Store

	mu       sync.Mutex
	ns       map[string]Namespace
	reject   func(Key) *kvringv1.PutChunkResult
	tokens   map[string]Access // nil: no authentication
	admin    bool              // the access of an anonymous client
	publishN int               // Publish calls
	// publishedFor is the client (package tenant) each Publish was made for.
	publishedFor []string
	// elsewhere, when set, says which keys another node holds: their bytes
	// live in remote, not in this node's store.
	elsewhere func(Key) bool
	remote    map[store.ID][]byte
	getCalls  int // Get calls
	// kept, when set, answers Kept instead of the store.
	kept func(Key) bool
	// unreachable, when set, says which keys a member that did not answer
	// may hold: reads of them fail as unavailable.
	unreachable func(Key) bool
	// maxNS, when set, is the most namespaces Namespace creates; past it,
	// ErrNamespaceLimit.
	maxNS int
	// leases are the leases Held was asked for.
	leases []time.Duration
}

func (f *fakeCluster) Namespace(_ context.Context, name string, create bool) (Namespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns, ok := f.ns[name]; ok {
		return ns, nil
	}
	if !create {
		return Namespace{}, ErrNoNamespace
	}
	if f.maxNS > 0 && len(f.ns) >= f.maxNS && name != DefaultKeyMap().DefaultNamespace() { // as the registry's Reserved
		return Namespace{}, fmt.Errorf("%w: this node holds %d namespaces", ErrNamespaceLimit, len(f.ns))
	}
	ns := Namespace{Ref: &kvringv1.NamespaceRef{Name: name, Fingerprint: []byte{1}}, Store: name + ":01"}
	f.ns[name] = ns
	return ns, nil
}

func (f *fakeCluster) Publish(ctx context.Context, ns Namespace, keys []Key, blobs []*store.Blob) ([]*kvringv1.PutChunkResult, error) {
	f.mu.Lock()
	f.publishN++
	f.publishedFor = append(f.publishedFor, tenant.From(ctx))
	reject := f.reject
	f.mu.Unlock()
	out := make([]*kvringv1.PutChunkResult, len(keys))
	for i, k := range keys {
		if reject != nil {
			if r := reject(k); r != nil {
				out[i] = r
				continue
			}
		}
		if f.elsewhere != nil && f.elsewhere(k) {
			f.mu.Lock()
			f.remote[k.ID] = append([]byte(nil), blobs[i].Bytes()...)
			f.mu.Unlock()
			out[i] = &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_STORED}
			continue
		}
		sum, err := blobs[i].Checksum()
		if err != nil {
			return nil, err
		}
		w, err := blobs[i].StageChunk(ns.Store, k.ID, sum)
		switch {
		case errors.Is(err, store.ErrAlreadyHeld):
			held, _ := f.st.HeldChecksum(ns.Store, k.ID)
			out[i] = &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD, HeldCrc32C: held}
			continue
		case err != nil:
			return nil, err
		}
		w.SetName(k.Name)
		if err := w.Seal(); err != nil {
			return nil, err
		}
		out[i] = &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_STORED}
	}
	return out, nil
}

// Kept: this node's store holds the key sealed (a key another node holds is
// never kept here), with its checksum.
func (f *fakeCluster) Kept(k Key) (uint32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns, ok := f.ns[k.Namespace]
	if f.kept != nil {
		sum, _ := f.st.HeldChecksum(ns.Store, k.ID)
		return sum, f.kept(k)
	}
	if !ok || (f.elsewhere != nil && f.elsewhere(k)) {
		return 0, false
	}
	return f.st.HeldChecksum(ns.Store, k.ID)
}

func (f *fakeCluster) Known(name string) (Namespace, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns, ok := f.ns[name]
	return ns, ok
}

func (f *fakeCluster) Held(_ context.Context, ns Namespace, keys []Probe, lease time.Duration) ([]bool, error) {
	out := make([]bool, len(keys))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, lease)
	has := func(k Key) bool {
		_, far := f.remote[k.ID]
		return far || f.st.Contains(ns.Store, k.ID)
	}
	for i, k := range keys {
		out[i] = has(k.Key)
		for _, sib := range k.Pin {
			out[i] = out[i] && has(sib)
		}
		if !out[i] && f.unreachable != nil && f.unreachable(k.Key) {
			return nil, fmt.Errorf("%w: node far did not answer", transfer.ErrUnavailable)
		}
	}
	return out, nil
}

func (f *fakeCluster) Get(_ context.Context, ns Namespace, keys []Key, each func(int, []byte, error) error) error {
	f.mu.Lock()
	f.getCalls++
	f.mu.Unlock()
	for i, k := range keys {
		f.mu.Lock()
		far, ok := f.remote[k.ID]
		f.mu.Unlock()
		if f.unreachable != nil && f.unreachable(k) {
			if err := each(i, nil, fmt.Errorf("%w: node far did not answer", transfer.ErrUnavailable)); err != nil {
				return err
			}
			continue
		}
		if ok {
			if err := each(i, far, nil); err != nil {
				return err
			}
			continue
		}
		v, err := f.st.Get(ns.Store, k.ID)
		if err != nil {
			if err := each(i, nil, nil); err != nil {
				return err
			}
			continue
		}
		err = each(i, append([]byte(nil), v.Bytes()...), nil)
		v.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeCluster) Delete(_ context.Context, ns Namespace, keys []Key) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = f.st.Evict(ns.Store, k.ID) == nil
	}
	return out, nil
}

func (f *fakeCluster) Flush(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for name, ns := range f.ns {
		if _, err := f.st.DropNamespace(ns.Store); err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, err
		}
		delete(f.ns, name)
		n++
	}
	return n, nil
}

func (f *fakeCluster) Authenticate(token string) (Access, error) {
	if a, ok := f.tokens[token]; ok {
		return a, nil
	}
	return Access{}, ErrBadToken
}

// Scan lists the names in this node's store (and none of the "remote"
// keys): the cursor is a count of names already listed.
func (f *fakeCluster) Scan(_ context.Context, cursor uint64, count int, _ bool) ([][]byte, uint64, error) {
	all, _ := f.st.Names(NamespacePrefix, nil, 1<<20)
	var out [][]byte
	for i := int(cursor); i < len(all) && len(out) < count; i++ {
		out = append(out, []byte(all[i].Name))
	}
	next := cursor + uint64(len(out))
	if int(next) >= len(all) {
		next = 0
	}
	return out, next, nil
}

// Slots: this node owns the lower half of the slots, "other" the upper.
func (f *fakeCluster) Slots() *SlotTable {
	return &SlotTable{Epoch: 7, Self: 0, Nodes: []SlotNode{{ID: "self", Host: "127.0.0.1", Port: 1}, {ID: "other", Host: "127.0.0.2", Port: 2}},
		Ranges: []SlotRange{{Start: 0, End: 8191, Owners: []int{0, 1}}, {Start: 8192, End: 16383, Owners: []int{1, 0}}}}
}

func (f *fakeCluster) SlotPlace(_ string, s uint16) store.ID { return store.ID{byte(s >> 8), byte(s)} }

func (f *fakeCluster) Anonymous() (Access, bool) { return Access{Admin: f.admin}, f.tokens != nil }

var _ = transfer.ErrUnavailable

// testServer serves a RESP port on 127.0.0.1 over a fake cluster until the
// test ends.
func testServer(t testing.TB, mod func(*Config, *fakeCluster)) (*Server, *fakeCluster) {
	t.Helper()
	cfg, fc := testConfig(t, mod)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveUntilCleanup(t, cfg, lis), fc
}

// testConfig is a server's Config over a fresh fake cluster, changed by mod
// (nil: none).
func testConfig(t testing.TB, mod func(*Config, *fakeCluster)) (Config, *fakeCluster) {
	t.Helper()
	st := testStore(t, 64<<20)
	fc := &fakeCluster{st: st, ns: map[string]Namespace{}, remote: map[store.ID][]byte{}}
	cfg := Config{Store: st, Cluster: fc, NodeID: "n1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg, fc)
	}
	return cfg, fc
}

// serveUntilCleanup serves cfg on lis until the test ends, and fails the
// test if Serve returned an error.
func serveUntilCleanup(t testing.TB, cfg Config, lis ...net.Listener) *Server {
	t.Helper()
	s, err := New(cfg, lis...)
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

// client is a go-redis client of s (protocol 2 unless proto says 3).
func client(t testing.TB, s *Server, proto int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: proto, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

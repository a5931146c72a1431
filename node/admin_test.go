package node

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/membership"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// startAdminTestNode starts a real single node (store, gRPC, admin, gossip)
// on loopback with ports picked by the kernel; the test's end closes it.
func startAdminTestNode(t *testing.T, data, shm string, opts ...func(*Config)) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Membership.Ring.ReplicationFactor = 3
	cfg.Membership.Logger = quietLogger()
	cfg.Store = store.DefaultConfig(data)
	cfg.Store.ShmDir, cfg.Store.MemoryLimit = shm, 64<<20
	cfg.Store.MaintenanceInterval = -1
	cfg.Store.Logger = quietLogger()
	cfg.Logger = quietLogger()
	for _, o := range opts {
		o(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

func testShmDir(t *testing.T) string {
	return testutil.ShmDir(t, "admin-")
}

// adminGet does one request to the admin address addr with a short
// deadline, so a handler that waits for the node's lock fails the test
// instead of hanging it. (Take addr before Close: Node.AdminAddr waits for
// the lifecycle lock.)
func adminGet(t *testing.T, addr, method, path string, v any) (int, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, want application/json: %s", method, path, ct, body)
	}
	if v == nil {
		v = new(any)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, body)
	}
	return resp.StatusCode, resp.Header
}

// TestAdminAPIDescribesASingleNode: cluster, ring, namespaces and readiness
// of a node alone, and JSON errors for unknown paths and wrong methods.
func TestAdminAPIDescribesASingleNode(t *testing.T) {
	t.Parallel()
	n := startAdminTestNode(t, t.TempDir(), testShmDir(t))
	admin := n.AdminAddr()

	var rd Readiness
	if code, _ := adminGet(t, admin, "GET", "/readyz", &rd); code != 200 || !rd.Ready || !rd.StoreOpen || !rd.Joined || !rd.Serving {
		t.Fatalf("/readyz = %d %+v, want 200 and every check true", code, rd)
	}
	var ci ClusterInfo
	if code, _ := adminGet(t, admin, "GET", "/v1/cluster", &ci); code != 200 {
		t.Fatalf("/v1/cluster = %d", code)
	}
	if ci.NodeID != n.NodeID() || ci.Epoch == 0 || len(ci.Members) != 1 {
		t.Fatalf("/v1/cluster = %+v, want this node alone at a non-zero epoch", ci)
	}
	m := ci.Members[0]
	if !m.Self || m.State != "active" || m.Liveness != "alive" || !m.RingMember || m.GRPCAddr != n.GRPCAddr() ||
		m.AdminAddr != n.AdminAddr() || m.GossipAddr != n.GossipAddr() || m.BootTime.IsZero() {
		t.Fatalf("member %+v does not describe the node (grpc %s admin %s gossip %s)", m, n.GRPCAddr(), n.AdminAddr(), n.GossipAddr())
	}
	var ri RingInfo
	adminGet(t, admin, "GET", "/v1/ring", &ri)
	if len(ri.Members) != 1 || ri.Members[0].Partitions != ri.PartitionCount || ri.PartitionCount != n.Ring().Config().PartitionCount ||
		ri.MaxLoad < ri.PartitionCount || ri.Epoch != ci.Epoch {
		t.Fatalf("/v1/ring = %+v, want one member primary for every partition", ri)
	}
	var ns struct{ Namespaces []NamespaceInfo }
	adminGet(t, admin, "GET", "/v1/namespaces", &ns)
	if ns.Namespaces == nil || len(ns.Namespaces) != 0 {
		t.Fatalf("/v1/namespaces = %+v, want an empty list", ns)
	}

	var e struct{ Error string }
	if code, _ := adminGet(t, admin, "GET", "/v1/nope", &e); code != 404 || !strings.Contains(e.Error, "/v1/nope") {
		t.Fatalf("GET /v1/nope = %d %q, want 404 naming the path", code, e.Error)
	}
	for _, path := range []string{"/v1/cluster", "/readyz", "/healthz"} {
		e.Error = ""
		code, h := adminGet(t, admin, "POST", path, &e)
		if code != 405 || !strings.Contains(h.Get("Allow"), "GET") || !strings.Contains(e.Error, "POST") {
			t.Fatalf("POST %s = %d (Allow %q) %q, want 405 with Allow: GET", path, code, h.Get("Allow"), e.Error)
		}
	}
}

// TestShutdownDrainsAPutInFlightAndReadinessGoesFalse: Close with a put
// stream open turns readiness false at once, keeps the admin API answering,
// waits for the put to finish (it is stored), and the store's catalog keeps
// the chunk for the next start on the same directories.
func TestShutdownDrainsAPutInFlightAndReadinessGoesFalse(t *testing.T) {
	t.Parallel()
	data, shm := t.TempDir(), testShmDir(t)
	n := startAdminTestNode(t, data, shm)
	admin, self := n.AdminAddr(), n.NodeID()
	ctx := t.Context()
	c := testClient(t, n.GRPCAddr(), 0, 0)
	fp, err := c.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ns struct{ Namespaces []NamespaceInfo }
	adminGet(t, admin, "GET", "/v1/namespaces", &ns)
	if len(ns.Namespaces) != 1 || ns.Namespaces[0].Name != "test/model" || ns.Namespaces[0].Fingerprint != "" || // hidden without an admin token
		ns.Namespaces[0].Schema.Model != "m" || ns.Namespaces[0].Schema.TokensPerChunk != 16 || ns.Namespaces[0].ReplicationFactor != 1 ||
		time.Since(ns.Namespaces[0].Created) > time.Minute {
		t.Fatalf("/v1/namespaces = %+v, want test/model, fingerprint hidden", ns)
	}

	cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ch := chunkOf(7, 300<<10)
	stream, err := kvringv1.NewCacheClient(cc).Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref := &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: fp}
	crc := crc32.Checksum(ch.Data, crc32.MakeTable(crc32.Castagnoli))
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref,
		Chunks: []*kvringv1.ChunkRef{{Id: ch.ID[:], Size: uint64(len(ch.Data)), Crc32C: crc}}}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || len(m.GetNeed().GetNeed()) != 1 {
		t.Fatalf("begin: %v %v, want the node to ask for the chunk", m, err)
	}

	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- n.Close(cctx)
	}()
	waitFor(t, "/readyz to answer 503, not ready, not serving, after Close began", func() bool {
		var rd Readiness
		code, _ := adminGet(t, admin, "GET", "/readyz", &rd)
		return code == 503 && !rd.Ready && !rd.Serving
	})
	var ci ClusterInfo
	if code, _ := adminGet(t, admin, "GET", "/v1/cluster", &ci); code != 200 || ci.NodeID != self {
		t.Fatalf("/v1/cluster during shutdown = %d %+v", code, ci)
	}
	var e struct{ Error string }
	if code, _ := adminGet(t, admin, "GET", "/v1/stats", &e); code != 503 || e.Error == "" {
		t.Fatalf("/v1/stats during shutdown = %d %q, want 503 with a reason", code, e.Error)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a put was in flight", err)
	default:
	}

	err = transfer.SplitFrames(0, ch.Data, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
		return stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: f}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	m, err := stream.Recv()
	if err != nil {
		t.Fatalf("the put in flight failed during shutdown: %v", err)
	}
	if r := m.GetResult().GetResults(); len(r) != 1 || r[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED {
		t.Fatalf("the put in flight: %v, want stored", m)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return after the put finished")
	}

	again := startAdminTestNode(t, data, shm)
	if !again.Store().Contains(namespace.StoreName("test/model", fp), store.ID(ch.ID)) {
		t.Fatal("the chunk stored during shutdown is not in the store after a restart")
	}
}

// TestPprofIsServedOnlyWhenEnabled: runtime profiles expose internals, so a
// node serves them on its admin address only when its operator asks.
func TestPprofIsServedOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		n := startAdminTestNode(t, t.TempDir(), testShmDir(t), func(c *Config) { c.EnablePprof = enabled })
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/cmdline"} {
			resp, err := http.Get("http://" + n.AdminAddr() + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusNotFound
			if enabled {
				want = http.StatusOK
			}
			if resp.StatusCode != want {
				t.Fatalf("pprof enabled %v: GET %s: %d, want %d: %.200s", enabled, path, resp.StatusCode, want, body)
			}
			if enabled && path == "/debug/pprof/heap?debug=1" && !strings.Contains(string(body), "heap profile") {
				t.Fatalf("GET %s did not serve a heap profile: %.200s", path, body)
			}
		}
	}
}

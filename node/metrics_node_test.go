package node

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// testNodeConfig is a single-host node configuration on free ports.
func testNodeConfig(t testing.TB) Config {
	t.Helper()
	shm := testutil.ShmDir(t, "node-")
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Membership.Ring.ReplicationFactor = 3
	cfg.Store = store.Config{DataDir: t.TempDir(), ShmDir: shm, MemoryLimit: 8 << 20}
	cfg.Logger = quietLogger()
	cfg.Membership.Logger = cfg.Logger
	return cfg
}

func startNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestNodeServesMetricsOnTheAdminPort: GET /metrics on a started node serves
// its own registry: store accounting, this node as an active alive member,
// the ring epoch, the build and the Go runtime.
func TestNodeServesMetricsOnTheAdminPort(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Build = buildinfo.Info{Version: "v0.4.0", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.0"}
	n := startNode(t, cfg)
	url := "http://" + n.AdminAddr() + "/metrics"
	var body string
	waitFor(t, "/metrics to show this node as an active member", func() bool {
		var code int
		code, body = httpGet(t, url)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", code, body)
		}
		return strings.Contains(body, `kvring_cluster_members{liveness="alive",state="active"} 1`)
	})
	for _, want := range []string{
		"kvring_store_limit_bytes 8.388608e+06",
		"kvring_store_chunks 0",
		"kvring_ring_members 1",
		`kvring_put_chunks_total{result="stored"} 0`,
		`kvring_request_duration_seconds_bucket{op="get",le="5e-05"} 0`,
		"go_goroutines ",
		`kvring_build_info{commit="0123456789abcdef0123456789abcdef01234567",commit_time="",goversion="go1.26.0",modified="false",version="v0.4.0"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(body, "kvring_ring_epoch ") || strings.Contains(body, "kvring_ring_epoch 0\n") {
		t.Errorf("ring epoch missing or 0 on a started node")
	}
}

// TestNodeMetricsAreUnregisteredOnClose: two running nodes cannot share an
// unlabelled registerer (Start says why); once the first closes, its metrics
// are gone and a new node can use the registerer.
func TestNodeMetricsAreUnregisteredOnClose(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	cfg := testNodeConfig(t)
	cfg.Registerer = reg
	first := startNode(t, cfg)
	if n, err := New(testNodeConfigWith(t, reg)); err != nil {
		t.Fatal(err)
	} else if err := n.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "cannot register metrics") {
		n.Close(context.Background())
		t.Fatalf("second node on the same registerer: Start returned %v, want a registration error", err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 0 {
		t.Fatalf("%d metric families left after Close, e.g. %s", len(mfs), mfs[0].GetName())
	}
	startNode(t, testNodeConfigWith(t, reg))
}

func testNodeConfigWith(t *testing.T, reg *prometheus.Registry) Config {
	cfg := testNodeConfig(t)
	cfg.Registerer = reg
	return cfg
}

// TestConfigMetricsDefaults: no registerer gives a fresh registry per node;
// a registerer that cannot gather needs a Gatherer.
func TestConfigMetricsDefaults(t *testing.T) {
	t.Parallel()
	a, b := testNodeConfig(t), testNodeConfig(t)
	if err := a.validate(); err != nil {
		t.Fatal(err)
	}
	if err := b.validate(); err != nil {
		t.Fatal(err)
	}
	if a.Registerer == nil || a.Registerer == b.Registerer || a.Gatherer != a.Registerer.(prometheus.Gatherer) {
		t.Fatalf("default registerers: %p %p", a.Registerer, b.Registerer)
	}
	c := testNodeConfig(t)
	c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"node": "x"}, prometheus.NewRegistry())
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "Gatherer") {
		t.Fatalf("wrapped registerer without a gatherer: %v", err)
	}
}

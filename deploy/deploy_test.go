package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store/disk"
)

// TestManifestsDecodeStrictly: every file of every kustomization decodes into its Kubernetes API type with
// no unknown field, and the objects are wired to each other (names, labels, ports).
func TestManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	base, err := Load("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	sm, err := Load("kubernetes/servicemonitor")
	if err != nil {
		t.Fatal(err)
	}
	bench, err := Load("kubernetes/bench")
	if err != nil {
		t.Fatal(err)
	}
	if base.StatefulSet == nil || base.ConfigMap == nil || base.PDB == nil || base.Namespace == nil ||
		base.Service("kvring") == nil || base.Service("kvring-peers") == nil || sm.ServiceMonitor == nil || bench.Job == nil {
		t.Fatalf("a manifest is missing: %+v", base)
	}
	ss := base.StatefulSet
	labels := ss.Spec.Template.Labels
	for _, sel := range []map[string]string{ss.Spec.Selector.MatchLabels, base.PDB.Spec.Selector.MatchLabels,
		base.Service("kvring").Spec.Selector, base.Service("kvring-peers").Spec.Selector} {
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("selector %v does not select the pods (labels %v)", sel, labels)
			}
		}
	}
	peers := base.Service("kvring-peers")
	if ss.Spec.ServiceName != peers.Name || peers.Spec.ClusterIP != "None" || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("the StatefulSet's Service %q must be headless and publish not-ready pods: %+v", ss.Spec.ServiceName, peers.Spec)
	}
	for k, v := range sm.ServiceMonitor.Spec.Selector.MatchLabels {
		if peers.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which kvring-peers lacks", k, v)
		}
	}
	c, err := Container(&ss.Spec.Template.Spec, "kvring")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, svc := range base.Services {
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort.String()]; !ok {
				t.Errorf("service %s port %s targets %q, which the container does not name", svc.Name, p.Name, p.TargetPort.String())
			}
		}
	}
	if base.Service("kvring").Spec.Ports[0].Port != 9600 {
		t.Errorf("the client Service listens on %d, want 9600", base.Service("kvring").Spec.Ports[0].Port)
	}
	if ss.Spec.Template.Annotations["prometheus.io/port"] != "9602" || ports["admin"] != 9602 {
		t.Errorf("scrape annotation port %q, admin port %d", ss.Spec.Template.Annotations["prometheus.io/port"], ports["admin"])
	}
	if base.PDB.Spec.MaxUnavailable == nil || base.PDB.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", base.PDB.Spec.MaxUnavailable)
	}
}

// TestStatefulSetSizing: the chunk budget (memory-limit in the ConfigMap) fits in the memory-backed /dev/shm
// volume, which fits in the container's memory limit (its pages count against it), with room for the heap.
func TestStatefulSetSizing(t *testing.T) {
	t.Parallel()
	m, err := Load("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	cfgText, err := m.ServeConfig()
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(cfgText), &cfg); err != nil {
		t.Fatal(err)
	}
	budget := resource.MustParse(strings.TrimSuffix(cfg["memory-limit"].(string), "B"))
	spec := m.StatefulSet.Spec.Template.Spec
	var shm *resource.Quantity
	for _, v := range spec.Volumes {
		if v.Name == "shm" && v.EmptyDir != nil && v.EmptyDir.Medium == "Memory" {
			shm = v.EmptyDir.SizeLimit
		}
	}
	c, _ := Container(&spec, "kvring")
	limit := c.Resources.Limits.Memory()
	if shm == nil || budget.Cmp(*shm) >= 0 || shm.Cmp(*limit) >= 0 {
		t.Fatalf("want memory-limit %s < shm sizeLimit %v < container memory limit %s", budget.String(), shm, limit)
	}
	if head := limit.Value() - budget.Value(); head < 1<<30 {
		t.Errorf("the container has %d bytes beyond the chunk budget for the heap and buffers, want ≥ 1 GiB", head)
	}
	if c.Resources.Requests.Memory().Cmp(*limit) != 0 {
		t.Errorf("memory request %s ≠ limit %s: a node under memory pressure would evict kvring first", c.Resources.Requests.Memory(), limit)
	}
}

// metricsIn returns the metric names an expression names (kvring_* and Prometheus' own up) with the
// equality matchers on each.
var (
	selectorRe = regexp.MustCompile(`\b(kvring_[a-z_]+|up)\b(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`([a-z_]+)\s*=\s*"([^"]*)"`)
)

type metricRef struct {
	name     string
	matchers map[string]string // label = value (=~, != are not checked)
	where    string
}

func refsIn(expr, where string) []metricRef {
	var out []metricRef
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		r := metricRef{name: m[1], matchers: map[string]string{}, where: where}
		for _, mm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			if i := strings.Index(m[2], mm[0]); i > 0 && strings.ContainsAny(m[2][i-1:i], "!~") {
				continue
			}
			r.matchers[mm[1]] = mm[2]
		}
		out = append(out, r)
	}
	return out
}

// dashboardAndAlertRefs returns every metric the Grafana dashboard and the alert rules name.
func dashboardAndAlertRefs(t *testing.T) []metricRef {
	t.Helper()
	var refs []metricRef
	var rules monitoringv1.PrometheusRuleSpec
	b, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr.String() == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want an alert name, an expression and a summary", r)
			}
			refs = append(refs, refsIn(r.Expr.String(), "alert "+r.Alert)...)
			n++
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err = os.ReadFile("grafana/kvring.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("kvring.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			refs = append(refs, refsIn(tg.Expr, "panel "+p.Title)...)
		}
	}
	if n < 5 || len(dash.Panels) < 10 || len(refs) < 20 {
		t.Fatalf("%d rules, %d panels, %d metric references: the files were not read", n, len(dash.Panels), len(refs))
	}
	return refs
}

// TestEveryDashboardAndAlertMetricIsExported: every metric a Grafana panel or an alert rule names, with
// every label value it matches on, is in the /metrics of a running node that served a put, a lookup and a
// get. `up` is the one exception: Prometheus writes it for each scrape.
func TestEveryDashboardAndAlertMetricIsExported(t *testing.T) {
	t.Parallel()
	refs := dashboardAndAlertRefs(t)
	series := liveSeries(t)
	for _, r := range refs {
		if r.name == "up" {
			continue
		}
		matched := slices.ContainsFunc(series[r.name], func(labels map[string]string) bool {
			for k, v := range r.matchers {
				if k == "job" {
					continue // the scrape's label
				}
				if labels[k] != v {
					return false
				}
			}
			return true
		})
		if !matched {
			t.Errorf("%s names %s%v, which the node does not export", r.where, r.name, r.matchers)
		}
	}
}

// liveSeries starts a node (with a disk tier), puts, looks up and gets a chunk through the SDK, sets and gets a
// key on its Redis-protocol port, and returns its /metrics: metric name → the label sets of its series.
func liveSeries(t *testing.T) map[string][]map[string]string {
	t.Helper()
	shm := testutil.ShmDir(t, "deploy-")
	cfg := node.DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Store.DataDir, cfg.Store.ShmDir = t.TempDir(), shm
	cfg.Store.MemoryLimit, cfg.Store.MaxChunkSize = 64<<20, 1<<20
	cfg.Disk = disk.Config{Dir: t.TempDir(), Limit: 16 << 20, RegionSize: 4 << 20} // its kvring_disk_* series
	cfg.RESP.Addr = "127.0.0.1:0"                                                  // its kvring_resp_* series
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	c, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "deploy/metrics",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, CallTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	id := client.ChunkID(sha256.Sum256([]byte("deploy")))
	if _, err := c.Put(ctx, []client.Chunk{{ID: id, Data: make([]byte, 4096)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, []client.ChunkID{id}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, []client.ChunkID{id}); err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: n.RESPAddr()})
	defer rc.Close()
	if err := rc.Set(ctx, "m@1@0@abc@bfloat16kv_bytes", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Get(ctx, "m@1@0@abc@bfloat16kv_bytes").Err(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + n.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return parseExposition(string(body))
}

var seriesRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? `)

// parseExposition reads the Prometheus text format: name → label sets.
func parseExposition(s string) map[string][]map[string]string {
	out := make(map[string][]map[string]string)
	for line := range strings.Lines(s) {
		m := seriesRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := make(map[string]string)
		for _, mm := range matcherRe.FindAllStringSubmatch(m[3], -1) {
			labels[mm[1]] = mm[2]
		}
		out[m[1]] = append(out[m[1]], labels)
	}
	return out
}

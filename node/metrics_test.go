package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/collectors"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/store"
)

// series is one scrape: `name{k="v",...}` → value, and which series are
// counters (histograms contribute name_count and name_sum as counters).
type series struct {
	v       map[string]float64
	counter map[string]bool
}

func scrape(t *testing.T, g prometheus.Gatherer) series {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := series{v: map[string]float64{}, counter: map[string]bool{}}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(labels)
			key := func(suffix string) string { return mf.GetName() + suffix + "{" + strings.Join(labels, ",") + "}" }
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.v[key("")], s.counter[key("")] = m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				s.v[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.v[key("_count")], s.counter[key("_count")] = float64(m.GetHistogram().GetSampleCount()), true
				s.v[key("_sum")], s.counter[key("_sum")] = m.GetHistogram().GetSampleSum(), true
			}
		}
	}
	return s
}

// get returns a series' value; the test fails if it is not exported.
func (s series) get(t *testing.T, name string) float64 {
	t.Helper()
	if !strings.Contains(name, "{") {
		name += "{}"
	}
	v, ok := s.v[name]
	if !ok {
		t.Fatalf("metric %s is not exported", name)
	}
	return v
}

// checkNoCounterWentDown fails for any counter of before that is lower (or
// gone) in after.
func checkNoCounterWentDown(t *testing.T, before, after series) {
	t.Helper()
	for k := range before.counter {
		if v, ok := after.v[k]; !ok || v < before.v[k] {
			t.Errorf("counter %s went from %v to %v (present: %v)", k, before.v[k], v, ok)
		}
	}
}

// checkStoreGauges compares the store metrics of one scrape with the store's
// own accounting, exactly. Stats is read before and after the scrape and must
// not have moved (the cluster is idle), so the comparison is exact.
func checkStoreGauges(t *testing.T, nd *testNode) series {
	t.Helper()
	var before, after store.Stats
	var s series
	// The admission policy evicts asynchronously: wait until it settles.
	waitFor(t, "node "+nd.id+"'s store to settle", func() bool {
		before = nd.st.Stats()
		s = scrape(t, nd.reg)
		after = nd.st.Stats()
		before.ResidentBytes, after.ResidentBytes = 0, 0 // the kernel's figure, not the store's accounting
		return fmt.Sprint(before) == fmt.Sprint(after)
	})
	for name, want := range map[string]int64{
		"kvring_store_limit_bytes":           before.LimitBytes,
		"kvring_store_used_bytes":            before.UsedBytes,
		"kvring_store_chunks":                before.Chunks,
		"kvring_store_payload_bytes":         before.PayloadBytes,
		"kvring_store_staged_chunks":         before.StagedChunks,
		"kvring_store_staged_bytes":          before.StagedBytes,
		"kvring_store_pinned_chunks":         before.PinnedChunks,
		"kvring_store_retained_free_bytes":   before.RetainedFreeBytes,
		"kvring_store_segments":              int64(before.Segments),
		"kvring_store_checksum_errors_total": int64(before.ChecksumErrors),
		"kvring_store_seals_total":           int64(before.Seals),
	} {
		if got := s.get(t, name); got != float64(want) {
			t.Errorf("node %s: %s = %v, the store says %d", nd.id, name, got, want)
		}
	}
	for _, r := range collectors.EvictionReasons(before.Evictions) {
		if got := s.get(t, fmt.Sprintf("kvring_store_evictions_total{reason=%q}", r)); got != float64(before.Evictions[r]) {
			t.Errorf("node %s: evictions %s = %v, the store says %d", nd.id, r, got, before.Evictions[r])
		}
	}
	for _, r := range collectors.RejectionReasons(before.Rejections) {
		if got := s.get(t, fmt.Sprintf("kvring_store_rejections_total{reason=%q}", r)); got != float64(before.Rejections[r]) {
			t.Errorf("node %s: rejections %s = %v, the store says %d", nd.id, r, got, before.Rejections[r])
		}
	}
	return s
}

// tally counts put results by their metric label, and their bytes.
func tally(chunks []client.Chunk, res []client.PutResult) (n map[string]int, bytes map[string]int, degraded int) {
	n, bytes = map[string]int{}, map[string]int{}
	for i, r := range res {
		n[r.Status.String()]++
		bytes[r.Status.String()] += len(chunks[i].Data)
		if r.Degraded {
			degraded++
		}
	}
	return n, bytes, degraded
}

// TestMetricsMatchTheStoreAndWhatTheEngineSaw: after a known sequence of
// puts, lookups and gets through one coordinator, its counters equal what
// the client was told, every node's store gauges equal the store's own
// accounting exactly, peer bytes sent equal peer bytes received across the
// cluster, and no counter goes down between two scrapes.
func TestMetricsMatchTheStoreAndWhatTheEngineSaw(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	coord := tc.nodes[0]
	// This test reads one coordinator's counters: every call must go through it.
	c := routedClient(t, coord.addr, 2, 1, func(cfg *client.Config) { cfg.DisableRouting = true })
	ctx := context.Background()

	var chunks []client.Chunk
	for i := uint64(0); i < 12; i++ {
		chunks = append(chunks, chunkOf(7000+i, 30_000+int(i)*1000))
	}
	first, err := c.Put(ctx, chunks[:8])
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	if _, err := c.Lookup(ctx, ids[:10], 0); err != nil { // 8 held of 10
		t.Fatal(err)
	}
	s1 := scrape(t, coord.reg)

	// Four again (already held) and four new (stored).
	second, err := c.Put(ctx, chunks[4:])
	if err != nil {
		t.Fatal(err)
	}
	missing := chunkOf(7999, 100).ID
	lr, err := c.Lookup(ctx, append(slices.Clone(ids), missing), 0)
	if err != nil {
		t.Fatal(err)
	}
	if lr.Held != len(ids) {
		t.Fatalf("lookup: %d held, want %d", lr.Held, len(ids))
	}
	got, err := c.Get(ctx, append(slices.Clone(ids[:5]), missing, chunkOf(7998, 100).ID))
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	for _, g := range got {
		if g.Found {
			hits++
		}
	}
	if hits != 5 {
		t.Fatalf("get: %d found, want 5", hits)
	}

	s2 := scrape(t, coord.reg)
	checkNoCounterWentDown(t, s1, s2)

	n1, b1, d1 := tally(chunks[:8], first)
	n2, b2, d2 := tally(chunks[4:], second)
	if n1["stored"] != 8 || n2["stored"] != 4 || n2["already_held"] != 4 {
		t.Fatalf("unexpected put results: %v then %v", n1, n2)
	}
	for _, r := range []string{metrics.PutStored, metrics.PutAlreadyHeld, metrics.PutRejected, metrics.PutFailed} {
		if got, want := s2.get(t, fmt.Sprintf("kvring_put_chunks_total{result=%q}", r)), n1[r]+n2[r]; got != float64(want) {
			t.Errorf("put chunks %s = %v, the client saw %d", r, got, want)
		}
		if got, want := s2.get(t, fmt.Sprintf("kvring_put_bytes_total{result=%q}", r)), b1[r]+b2[r]; got != float64(want) {
			t.Errorf("put bytes %s = %v, the client put %d", r, got, want)
		}
	}
	if got := s2.get(t, "kvring_put_degraded_total"); got != float64(d1+d2) {
		t.Errorf("degraded = %v, the client saw %d", got, d1+d2)
	}
	for name, want := range map[string]float64{
		"kvring_lookups_total":                               2,
		"kvring_lookup_ids_total":                            10 + 13,
		"kvring_lookup_ids_matched_total":                    8 + 12,
		`kvring_get_chunks_total{result="hit"}`:              5,
		`kvring_get_chunks_total{result="miss"}`:             2,
		`kvring_get_chunks_total{result="checksum_error"}`:   0,
		`kvring_get_chunks_total{result="unavailable"}`:      0,
		`kvring_request_duration_seconds_count{op="put"}`:    2,
		`kvring_request_duration_seconds_count{op="lookup"}`: 2,
		`kvring_request_duration_seconds_count{op="get"}`:    1,
		"kvring_ring_epoch":                                  1,
		"kvring_ring_members":                                3,
		"kvring_peers_unreachable":                           0,
		"kvring_peer_failures_total":                         0,
	} {
		if got := s2.get(t, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	var hitBytes int
	for _, g := range got {
		hitBytes += len(g.Data)
	}
	if got := s2.get(t, "kvring_get_bytes_total"); got != float64(hitBytes) {
		t.Errorf("get bytes = %v, the client read %d", got, hitBytes)
	}
	if open := s2.get(t, "kvring_grpc_connections"); open < 1 || open > s2.get(t, "kvring_grpc_connections_opened_total") {
		t.Errorf("open connections = %v, opened %v: want at least the client's, at most all opened",
			open, s2.get(t, "kvring_grpc_connections_opened_total"))
	}

	// Every node: store gauges equal the store's accounting; the cluster's
	// peer bytes balance (every byte one node sent, another received).
	var sent, received float64
	var held int64
	for _, nd := range tc.nodes {
		s := checkStoreGauges(t, nd)
		sent += s.get(t, `kvring_peer_transfer_bytes_total{direction="sent"}`)
		received += s.get(t, `kvring_peer_transfer_bytes_total{direction="received"}`)
		held += nd.st.Stats().Chunks
		if problems, err := testutil.GatherAndLint(nd.reg); err != nil || len(problems) > 0 {
			t.Errorf("node %s: metric lint: %v %v", nd.id, problems, err)
		}
	}
	if held != int64(2*len(chunks)) {
		t.Errorf("the cluster holds %d chunks, want %d (R=2)", held, 2*len(chunks))
	}
	if sent == 0 || sent != received {
		t.Errorf("peer bytes: %v sent, %v received; want equal and non-zero", sent, received)
	}
	checkNoCounterWentDown(t, s2, scrape(t, coord.reg))
}

// TestPutRejectionsAreCountedAsTheEngineSawThem: on a node whose budget
// cannot hold every chunk, the put counters by result are the client's
// results and the store's rejection and eviction counters are its own.
func TestPutRejectionsAreCountedAsTheEngineSawThem(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 1<<20)
	nd := tc.nodes[0]
	c := routedClient(t, nd.addr, 1, 1, func(cfg *client.Config) { cfg.DisableRouting = true }) // counts one coordinator
	var chunks []client.Chunk
	for i := uint64(0); i < 12; i++ {
		chunks = append(chunks, chunkOf(8000+i, 200_000))
	}
	res, err := c.Put(context.Background(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	n, b, _ := tally(chunks, res)
	if n[metrics.PutRejected] == 0 || n[metrics.PutStored]+n[metrics.PutRejected] != len(chunks) {
		t.Fatalf("put results %v: want some stored and the rest rejected (1 MiB budget, 12 × 200 kB)", n)
	}
	s := checkStoreGauges(t, nd)
	for _, r := range []string{metrics.PutStored, metrics.PutAlreadyHeld, metrics.PutRejected, metrics.PutFailed} {
		if got := s.get(t, fmt.Sprintf("kvring_put_chunks_total{result=%q}", r)); got != float64(n[r]) {
			t.Errorf("put chunks %s = %v, the client saw %d", r, got, n[r])
		}
		if got := s.get(t, fmt.Sprintf("kvring_put_bytes_total{result=%q}", r)); got != float64(b[r]) {
			t.Errorf("put bytes %s = %v, the client saw %d", r, got, b[r])
		}
	}
	if st := nd.st.Stats(); st.UsedBytes > st.LimitBytes || s.get(t, "kvring_store_used_bytes") > s.get(t, "kvring_store_limit_bytes") {
		t.Errorf("used above the limit: %+v", st)
	}
}

package resp

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// fakeClock is a clock the test moves (Config.Now).
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// nsSeries gathers s's per-namespace counters: "writes|reads namespace
// result" → value.
func nsSeries(t *testing.T, s *Server) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.ns)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		kind := strings.TrimSuffix(strings.TrimPrefix(mf.GetName(), "kvring_resp_namespace_"), "_total")
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[kind+" "+l["namespace"]+" "+l["result"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

// lmKey is a key of LMCache's shape in model's namespace.
func lmKey(model string, hash int) string {
	return fmt.Sprintf("%s@1@0@%x@bfloat16kv_bytes", model, hash)
}

const (
	nsA = "resp:model-a:1:0:bfloat16"
	nsB = "resp:model-b:1:0:bfloat16"
)

// TestARefusedSetIsCountedAndLoggedOncePerNamespaceAndReasonAMinute: every
// SET the port refuses counts in kvring_resp_errors_total by reason and in
// its namespace's refused writes; a WARN line names the namespace and the
// reason, at most once a minute per namespace and reason (the clock is the
// test's), and the next one says how many were not logged.
func TestARefusedSetIsCountedAndLoggedOncePerNamespaceAndReasonAMinute(t *testing.T) {
	clock := newFakeClock()
	logs := &testutil.Logs{}
	s, fc := testServer(t, func(cfg *Config, _ *fakeCluster) { cfg.Now, cfg.Logger = clock.now, logs.Logger() })
	fc.mu.Lock()
	fc.reject = func(k Key) *kvringv1.PutChunkResult {
		if strings.Contains(k.Name, "@feed") {
			return &kvringv1.PutChunkResult{Status: kvringv1.PutStatus_PUT_STATUS_REJECTED, Code: uint32(codes.ResourceExhausted), Reason: "no space"}
		}
		return nil
	}
	fc.mu.Unlock()
	c := client(t, s, 2)
	ctx := context.Background()
	for i := range 3 {
		if err := c.Set(ctx, lmKey("model-a", 0xfeed0+i), "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
			t.Fatalf("SET into a full node: %v, want -OOM", err)
		}
	}
	const line = "Redis-protocol write refused"
	if n := logs.Count(line, "namespace="+nsA, "reason=no_space"); n != 1 {
		t.Fatalf("%d WARN lines for three refusals within a minute, want 1:\n%s", n, logs)
	}
	if err := c.Set(ctx, lmKey("model-b", 0xfeed0), "v", 0).Err(); err == nil {
		t.Fatal("SET into a full node: OK")
	}
	if n := logs.Count(line, "namespace="+nsB, "reason=no_space"); n != 1 {
		t.Fatalf("another namespace's refusal: %d WARN lines, want its own:\n%s", n, logs)
	}
	clock.advance(refusalWarnEvery)
	if err := c.Set(ctx, lmKey("model-a", 0xfeed9), "v", 0).Err(); err == nil {
		t.Fatal("SET into a full node: OK")
	}
	if got := logs.Lines(line, "namespace="+nsA, "reason=no_space"); len(got) != 2 || !strings.Contains(got[1], "not_logged_since_last=2") {
		t.Fatalf("a minute later: %q, want a second line counting the 2 not logged", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the lines are not WARN:\n%s", logs)
	}
	if got := promtest.ToFloat64(s.m.errors.WithLabelValues("no_space")); got != 5 {
		t.Fatalf(`kvring_resp_errors_total{reason="no_space"} = %v, want 5`, got)
	}
	if err := c.Set(ctx, lmKey("model-a", 1), "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got := nsSeries(t, s)
	for key, want := range map[string]float64{"writes " + nsA + " refused": 4, "writes " + nsA + " stored": 1,
		"writes " + nsB + " refused": 1, "writes " + nsB + " stored": 0, "reads " + nsA + " hit": 0} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
}

// TestEveryRefusalPathCountsWithItsReason: -TRYAGAIN, other bytes, NOPERM
// and an MSET with several values refused count by their own reason and
// are logged, each naming the namespace; a key written to the default
// namespace because its own cannot be created is logged and counted as a
// fallback (its SET is OK).
func TestEveryRefusalPathCountsWithItsReason(t *testing.T) {
	logs := &testutil.Logs{}
	s, fc := testServer(t, func(cfg *Config, fc *fakeCluster) {
		cfg.Logger = logs.Logger()
		fc.tokens = map[string]Access{"t": {Allows: func(ns string) bool { return ns != nsB }}}
		fc.maxNS = 2
	})
	fc.mu.Lock()
	fc.reject = func(k Key) *kvringv1.PutChunkResult {
		if strings.Contains(k.Name, "@dead") {
			return &kvringv1.PutChunkResult{Status: kvringv1.PutStatus_PUT_STATUS_FAILED, Code: uint32(codes.Unavailable), Reason: "owner down"}
		}
		return nil
	}
	fc.mu.Unlock()
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.Do(ctx, "AUTH", "t").Err(); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do     func() error
		prefix string
		ns     string
		reason string
	}{
		{func() error { return c.Set(ctx, lmKey("model-a", 0xdead), "v", 0).Err() }, "TRYAGAIN", nsA, "unavailable"},
		{func() error { return c.Set(ctx, lmKey("model-a", 2), "first", 0).Err() }, "", "", ""},
		{func() error { return c.Set(ctx, lmKey("model-a", 2), "other", 0).Err() }, "ERR kvring", nsA, "other_bytes"},
		{func() error { return c.Set(ctx, lmKey("model-b", 2), "v", 0).Err() }, "NOPERM", nsB, "noperm"},
		{func() error { return c.MSet(ctx, lmKey("model-a", 0xdead1), "v", lmKey("model-a", 0xdead2), "v").Err() }, "TRYAGAIN", nsA, "unavailable"},
	}
	for i, st := range steps {
		err := st.do()
		if st.prefix == "" {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), st.prefix) {
			t.Fatalf("step %d: %v, want %s", i, err, st.prefix)
		}
		if logs.Count("Redis-protocol write refused", "namespace="+st.ns, "reason="+st.reason) != 1 {
			t.Fatalf("step %d: no WARN line for namespace %s, reason %s:\n%s", i, st.ns, st.reason, logs)
		}
	}
	for reason, want := range map[string]float64{"unavailable": 2, "other_bytes": 1, "noperm": 1} {
		if got := promtest.ToFloat64(s.m.errors.WithLabelValues(reason)); got != want {
			t.Errorf(`kvring_resp_errors_total{reason=%q} = %v, want %v`, reason, got, want)
		}
	}
	// The namespace limit (2: model-a's and one more) is reached: model-c's key goes to the default namespace.
	if err := c.Set(ctx, lmKey("model-d", 1), "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, lmKey("model-c", 1), "v", 0).Err(); err != nil {
		t.Fatalf("SET past the namespace limit: %v, want OK (the default namespace takes it)", err)
	}
	if logs.Count("go to the default namespace", "namespace=resp:model-c:1:0:bfloat16") != 1 ||
		promtest.ToFloat64(s.m.fallbacks) != 1 || nsSeries(t, s)["writes resp:default stored"] != 1 {
		t.Fatalf("a key written to the default namespace: fallbacks %v, series %v, logs:\n%s", promtest.ToFloat64(s.m.fallbacks), nsSeries(t, s), logs)
	}
}

// TestReadsCountPerNamespaceAndADroppedNamespaceLosesItsSeries: GET, MGET
// and EXISTS count hits and misses in the key's namespace; a namespace
// nothing was written to is not counted (its name is any client's); once
// the namespaces are dropped (FLUSHDB) their series are gone.
func TestReadsCountPerNamespaceAndADroppedNamespaceLosesItsSeries(t *testing.T) {
	s, _ := testServer(t, func(_ *Config, fc *fakeCluster) { fc.admin = true })
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.Set(ctx, lmKey("model-a", 1), "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.Get(ctx, lmKey("model-a", 1))
	c.Get(ctx, lmKey("model-a", 2))
	c.MGet(ctx, lmKey("model-a", 1), lmKey("model-a", 3))
	c.Exists(ctx, lmKey("model-a", 1), lmKey("model-a", 4))
	c.Get(ctx, lmKey("model-z", 1))
	got := nsSeries(t, s)
	for key, want := range map[string]float64{"reads " + nsA + " hit": 3, "reads " + nsA + " miss": 3, "reads " + nsA + " error": 0,
		"writes " + nsA + " stored": 1} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
	if len(got) != 6 {
		t.Errorf("%d series, want model-a's 6 alone: %v", len(got), got)
	}
	if err := c.Do(ctx, "FLUSHDB").Err(); err != nil {
		t.Fatal(err)
	}
	if got := nsSeries(t, s); len(got) != 0 {
		t.Fatalf("after FLUSHDB: %v, want no series", got)
	}
}

// TestWarningsRememberABoundedNumberOfKeys: past its bound the limiter
// forgets keys whose minute has passed, and drops lines while none has.
func TestWarningsRememberABoundedNumberOfKeys(t *testing.T) {
	w := newWarnings(time.Minute, 2, 100)
	t0 := time.Unix(1000, 0)
	for i, want := range []bool{true, true, false} {
		if ok, _ := w.ok(warnKey{fmt.Sprint(i), "r"}, t0); ok != want {
			t.Fatalf("key %d: ok = %v, want %v", i, ok, want)
		}
	}
	if ok, _ := w.ok(warnKey{"2", "r"}, t0.Add(time.Minute)); !ok || len(w.last) != 1 {
		t.Fatalf("a minute later: ok %v with %d keys remembered, want true with 1", ok, len(w.last))
	}
}

// TestWarningsBoundTheLinesOfAllKeys: many namespaces' refusals within a
// minute log at most the limiter's lines; a minute later they log again,
// and a remembered key's line counts those it dropped.
func TestWarningsBoundTheLinesOfAllKeys(t *testing.T) {
	w := newWarnings(time.Minute, 100, 3)
	t0 := time.Unix(1000, 0)
	logged := 0
	for i := range 10 {
		if ok, _ := w.ok(warnKey{fmt.Sprint(i), "r"}, t0); ok {
			logged++
		}
	}
	w.ok(warnKey{"0", "r"}, t0) // dropped: its key's minute has not passed
	if logged != 3 {
		t.Fatalf("%d lines for 10 namespaces within a minute, want 3", logged)
	}
	if ok, n := w.ok(warnKey{"0", "r"}, t0.Add(time.Minute)); !ok || n != 1 {
		t.Fatalf("a minute later: ok %v, %d not logged; want true, 1", ok, n)
	}
}

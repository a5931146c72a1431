package main

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTheSameSeedDrawsTheSameSchedule(t *testing.T) {
	cfg := defaultConfig()
	cfg.Duration = 5 * time.Minute
	draw := func(seed uint64) string {
		cfg.Seed = seed
		ev, err := randomSchedule(cfg, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, e := range ev {
			s = append(s, e.String())
		}
		return strings.Join(s, "\n")
	}
	if a, b := draw(7), draw(7); a != b {
		t.Fatalf("seed 7 drew two schedules:\n%s\n--\n%s", a, b)
	}
	if draw(7) == draw(8) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
}

func TestARandomScheduleFitsItsDurationAndHealsEveryFault(t *testing.T) {
	cfg := defaultConfig()
	cfg.Nodes, cfg.Duration = 3, 55*time.Second
	cfg.FaultMin, cfg.FaultMax, cfg.QuietMin, cfg.QuietMax = 4*time.Second, 10*time.Second, 3*time.Second, 6*time.Second
	for seed := range uint64(50) {
		ev, err := randomSchedule(cfg, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		var total time.Duration
		for i, e := range ev {
			total += e.dur
			if (i%2 == 0) != (e.kind == "quiet") {
				t.Fatalf("seed %d: event %d is %s: want quiet and faults in turn", seed, i, e)
			}
			if e.kind == "pause" && (e.dur < 2*time.Second || e.dur > 30*time.Second) {
				t.Fatalf("seed %d: %s: pauses last 2-30 s", seed, e)
			}
		}
		if total > cfg.Duration {
			t.Fatalf("seed %d: schedule lasts %v, more than %v", seed, total, cfg.Duration)
		}
	}
}

func TestPartitionsSplitTheNodesAsNamed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		kind  string
		n     int
		sizes []int
	}{
		{"halves", 5, []int{2, 3}}, {"halves", 4, []int{2, 2}}, {"isolate", 5, []int{1, 4}},
		{"minority", 5, []int{2, 3}}, {"minority", 3, []int{1, 2}}, {"bridge", 5, []int{1, 1, 1}}, {"oneway", 3, []int{1}},
	} {
		e := makeEvent(tc.kind, tc.n, 0, time.Second, rng)
		var sizes, all []int
		for _, s := range e.sides {
			sizes = append(sizes, len(s))
			all = append(all, s...)
		}
		if !slices.Equal(sizes, tc.sizes) {
			t.Errorf("%s on %d nodes: sides %v, want sizes %v", tc.kind, tc.n, e.sides, tc.sizes)
		}
		slices.Sort(all)
		if len(slices.Compact(all)) != len(all) {
			t.Errorf("%s: a node on two sides: %v", tc.kind, e.sides)
		}
	}
}

func TestParseScheduleReadsKindsParametersAndDurations(t *testing.T) {
	ev, err := parseSchedule("quiet:5s, loss5:2m,bandwidth2:20s,isolate:30s", 5, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind  string
		param int
		dur   time.Duration
	}{{"quiet", 0, 5 * time.Second}, {"loss", 5, 2 * time.Minute}, {"bandwidth", 2, 20 * time.Second}, {"isolate", 0, 30 * time.Second}}
	if len(ev) != len(want) {
		t.Fatalf("got %d events, want %d", len(ev), len(want))
	}
	for i, w := range want {
		if ev[i].kind != w.kind || ev[i].param != w.param || ev[i].dur != w.dur {
			t.Errorf("event %d: %+v, want %+v", i, ev[i], w)
		}
	}
	for _, bad := range []string{"isolate", "nap:5s", "loss5:soon", "bridge:5s"} {
		if _, err := parseSchedule(bad, 2, rand.New(rand.NewPCG(1, 1))); err == nil {
			t.Errorf("parseSchedule(%q) accepted it", bad)
		}
	}
}

// A holder is a phantom only when it was out (killed or stopped) for the
// whole of the call that named it: a node paused mid-call may have answered
// before it stopped.
func TestANodeIsOutOnlyForCallsItsOutageCovers(t *testing.T) {
	c := newCluster(Config{Nodes: 1}, topology{}, time.Time{})
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	c.markOut(0, at(10))
	c.markBack(0, at(20))
	c.markOut(0, at(30)) // still out
	for _, tc := range []struct {
		from, to int
		out      bool
	}{
		{11, 19, true}, {10, 20, true}, {9, 15, false}, {15, 21, false}, {21, 29, false}, {31, 99, true}, {29, 31, false},
	} {
		if got := c.wasOut(0, at(tc.from), at(tc.to)); got != tc.out {
			t.Errorf("call %ds..%ds: wasOut %v, want %v", tc.from, tc.to, got, tc.out)
		}
	}
}

func TestRulesNameOnlyTheRunsAddresses(t *testing.T) {
	topo := newTopology("kvnfabc", 3, 99)
	if got := topo.nodeIP(2); got != "10.213.99.12" {
		t.Fatalf("nodeIP(2) = %s", got)
	}
	for _, ns := range topo.namespaces() {
		if !strings.HasPrefix(ns, "kvnfabc-") {
			t.Errorf("namespace %q is not named after the run", ns)
		}
	}
}

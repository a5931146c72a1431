package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvring/kvring/node/membership"
)

// The fault kinds the nemesis picks from.
var faultKinds = []string{"halves", "isolate", "minority", "bridge", "oneway", "loss", "bandwidth", "pause", "kill"}

func faultKindList() string { return strings.Join(faultKinds, ", ") }

// event is one fault: what, on which nodes, for how long.
type event struct {
	kind  string
	dur   time.Duration
	sides [][]int // partitions: the sides; oneway: sides[0] is the node whose packets are dropped
	node  int     // pause, kill, bandwidth
	param int     // loss: percent; bandwidth: Mbit/s
}

func (e event) String() string {
	switch e.kind {
	case "quiet":
		return fmt.Sprintf("quiet for %v", e.dur)
	case "halves", "isolate", "minority":
		return fmt.Sprintf("partition %s %s for %v", e.kind, sidesString(e.sides), e.dur)
	case "bridge":
		return fmt.Sprintf("partition bridge: n%d sees n%d sees n%d, n%d and n%d cut, for %v",
			e.sides[0][0], e.sides[1][0], e.sides[2][0], e.sides[0][0], e.sides[2][0], e.dur)
	case "oneway":
		return fmt.Sprintf("one-way: packets from n%d to every other node dropped, for %v", e.sides[0][0], e.dur)
	case "loss":
		return fmt.Sprintf("random loss %d%% on every link for %v", e.param, e.dur)
	case "bandwidth":
		return fmt.Sprintf("bandwidth of n%d capped at %d Mbit/s for %v", e.node, e.param, e.dur)
	case "pause":
		return fmt.Sprintf("SIGSTOP n%d for %v", e.node, e.dur)
	case "kill":
		return fmt.Sprintf("SIGKILL n%d, restart after %v", e.node, e.dur)
	}
	return e.kind
}

func sidesString(sides [][]int) string {
	var parts []string
	for _, s := range sides {
		var n []string
		for _, i := range s {
			n = append(n, "n"+strconv.Itoa(i))
		}
		parts = append(parts, "{"+strings.Join(n, ",")+"}")
	}
	return strings.Join(parts, "|")
}

// makeEvent builds a fault of kind on n nodes, choosing nodes with rng.
func makeEvent(kind string, n int, param int, dur time.Duration, rng *rand.Rand) event {
	perm := rng.Perm(n)
	e := event{kind: kind, dur: dur, param: param, node: perm[0]}
	switch kind {
	case "halves":
		e.sides = [][]int{sorted(perm[:n/2]), sorted(perm[n/2:])}
	case "isolate":
		e.sides = [][]int{{perm[0]}, sorted(perm[1:])}
	case "minority":
		k := max(1, (n-1)/2)
		e.sides = [][]int{sorted(perm[:k]), sorted(perm[k:])}
	case "bridge":
		e.sides = [][]int{{perm[0]}, {perm[1]}, {perm[2]}}
	case "oneway":
		e.sides = [][]int{{perm[0]}}
	case "loss":
		if e.param == 0 {
			e.param = 1 + rng.IntN(20)
		}
	case "bandwidth":
		if e.param == 0 {
			e.param = []int{1, 2, 5, 10}[rng.IntN(4)]
		}
	}
	return e
}

func sorted(s []int) []int { return slices.Sorted(slices.Values(s)) }

// randomSchedule draws faults (each followed by a heal) and quiet times from
// the seed until cfg.Duration is filled.
func randomSchedule(cfg Config, rng *rand.Rand) ([]event, error) {
	kinds := faultKinds
	if cfg.Faults != "all" {
		kinds = strings.Split(cfg.Faults, ",")
	}
	var usable []string
	for _, k := range kinds {
		if !slices.Contains(faultKinds, k) {
			return nil, fmt.Errorf("unknown fault kind %q (want %s)", k, faultKindList())
		}
		if (k == "bridge" && cfg.Nodes < 3) || (cfg.Nodes < 2 && k != "loss" && k != "bandwidth" && k != "pause" && k != "kill") {
			continue
		}
		usable = append(usable, k)
	}
	if len(usable) == 0 {
		return nil, fmt.Errorf("no fault kind of %q applies to %d nodes", cfg.Faults, cfg.Nodes)
	}
	between := func(a, b time.Duration) time.Duration {
		if b <= a {
			return a
		}
		return (a + time.Duration(rng.Int64N(int64(b-a)))).Round(time.Second)
	}
	var out []event
	var t time.Duration
	for t < cfg.Duration {
		q := between(cfg.QuietMin, cfg.QuietMax)
		kind := usable[rng.IntN(len(usable))]
		d := between(cfg.FaultMin, cfg.FaultMax)
		if kind == "pause" {
			d = between(2*time.Second, 30*time.Second)
		}
		if t+q+d > cfg.Duration && len(out) > 0 {
			break
		}
		out = append(out, event{kind: "quiet", dur: q}, makeEvent(kind, cfg.Nodes, 0, d, rng))
		t += q + d
	}
	return out, nil
}

// parseSchedule reads a fixed schedule: comma-separated kind[param]:duration
// items, such as "quiet:20s,isolate:30s,loss5:2m,bandwidth2:20s,pause:10s".
func parseSchedule(s string, n int, rng *rand.Rand) ([]event, error) {
	var out []event
	for _, item := range strings.Split(s, ",") {
		spec, durS, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("schedule item %q: want kind:duration", item)
		}
		dur, err := time.ParseDuration(durS)
		if err != nil {
			return nil, fmt.Errorf("schedule item %q: %w", item, err)
		}
		kind := strings.TrimRight(spec, "0123456789")
		param := 0
		if kind != spec {
			param, _ = strconv.Atoi(spec[len(kind):])
		}
		if kind == "quiet" {
			out = append(out, event{kind: "quiet", dur: dur})
			continue
		}
		if !slices.Contains(faultKinds, kind) {
			return nil, fmt.Errorf("schedule item %q: unknown kind %q (want quiet or %s)", item, kind, faultKindList())
		}
		if kind == "bridge" && n < 3 {
			return nil, fmt.Errorf("schedule item %q: a bridge needs 3 nodes", item)
		}
		out = append(out, makeEvent(kind, n, param, dur, rng))
	}
	return out, nil
}

// measure is one timing the nemesis took.
type measure struct {
	what string
	d    time.Duration
	ok   bool // false: the condition did not hold within its bound
}

// nemesis applies a schedule to the cluster and measures failure detection
// and convergence.
type nemesis struct {
	cfg  Config
	topo topology
	c    *cluster
	o    *observer
	h    *history
	ids  []string
	t0   time.Time
	log  io.Writer

	mu         sync.Mutex
	measures   []measure
	violations []string
}

func (n *nemesis) logf(format string, args ...any) {
	fmt.Fprintf(n.log, "[+%7.1fs %s] %s\n", time.Since(n.t0).Seconds(), time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (n *nemesis) note(m measure) {
	n.mu.Lock()
	n.measures = append(n.measures, m)
	n.mu.Unlock()
	state := "took"
	if !m.ok {
		state = "NOT within bound after"
	}
	n.logf("measured: %s %s %.1fs", m.what, state, m.d.Seconds())
}

func (n *nemesis) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.violations = append(n.violations, msg)
	n.mu.Unlock()
	n.logf("VIOLATION: %s", msg)
}

// suspicionTimeout is memberlist's suspicion timeout for n members with
// kvring's default gossip timings (membership.DefaultSuspicionMult 8,
// DefaultProbeInterval 500 ms): SuspicionMult × max(1, log10 n) ×
// ProbeInterval, 4 s up to 10 members, 4.8 s at 16 (a suspicion lasts
// exactly that: DefaultSuspicionMaxTimeoutMult 1). Runs that pass other
// timings to the nodes set -converge-bound and -detect-bound.
func suspicionTimeout(n int) time.Duration {
	mult := float64(membership.DefaultSuspicionMult)
	return time.Duration(mult * math.Max(1, math.Log10(float64(n))) * float64(membership.DefaultProbeInterval))
}

// detectBound is how soon the others must take nodes lost for longer off
// their ring (negative: not checked).
func (n *nemesis) detectBound() time.Duration {
	if n.cfg.Detect != 0 {
		return n.cfg.Detect
	}
	return 2 * suspicionTimeout(n.cfg.Nodes)
}

// convergeBound is how soon after a heal every node must see every node
// alive on one ring.
func (n *nemesis) convergeBound() time.Duration {
	if n.cfg.Converge > 0 {
		return n.cfg.Converge
	}
	return 2 * suspicionTimeout(n.cfg.Nodes)
}

// run applies events in order; it returns early when ctx ends, after healing.
func (n *nemesis) run(ctx context.Context, events []event) {
	for _, e := range events {
		if ctx.Err() != nil {
			return
		}
		if e.kind == "quiet" {
			n.h.setPhase("quiet")
			n.logf("%s", e)
			sleepCtx(ctx, e.dur)
			continue
		}
		n.h.setPhase(e.kind)
		n.logf("fault: %s", e)
		n.apply(ctx, e)
		if dropped, err := n.topo.dropped(ctx); err == nil && dropped > 0 {
			n.logf("the switch dropped %d packets", dropped)
		}
		n.logf("heal")
		n.h.setPhase("heal")
		n.heal(context.WithoutCancel(ctx), e)
		if e.kind == "kill" {
			// Convergence is measured from when the restarted node answers:
			// its start-up (opening and checksumming what it holds) is no
			// gossip time.
			d, ok := waitFor(ctx, n.cfg.Settle, func(ctx context.Context) bool {
				_, err := n.o.view(ctx, e.node)
				return err == nil
			})
			n.note(measure{what: fmt.Sprintf("start-up of n%d after its restart", e.node), d: d, ok: ok})
		}
		d, ok := waitFor(ctx, n.cfg.Settle, func(ctx context.Context) bool { return n.o.converged(ctx, n.ids) })
		if ctx.Err() != nil {
			return
		}
		n.note(measure{what: "convergence after healing " + e.kind, d: d, ok: ok})
		switch bound := n.convergeBound(); {
		case !ok:
			n.violate("the cluster did not converge within %v after healing %s", n.cfg.Settle, e)
		case d > bound:
			n.violate("the cluster took %.1fs to converge after healing %s, more than %v", d.Seconds(), e, bound)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// apply starts fault e, watches it for its duration, and returns with it
// still in place (heal ends it).
func (n *nemesis) apply(ctx context.Context, e event) {
	start := time.Now()
	gone, watchers := n.start(ctx, e)
	fctx, cancel := context.WithDeadline(ctx, start.Add(e.dur))
	defer cancel()
	var wg sync.WaitGroup
	if gone != nil && e.kind != "oneway" {
		wg.Go(func() { n.watchGone(ctx, fctx, e, gone, watchers) })
	}
	if e.kind == "loss" {
		wg.Go(func() { n.watchLoss(fctx, e) })
	}
	<-fctx.Done()
	wg.Wait()
}

// start puts fault e in place and returns the nodes the others should drop
// from their ring (gone) and who should drop them (watchers).
func (n *nemesis) start(ctx context.Context, e event) (gone, watchers []int) {
	ip := n.topo.nodeIP
	var rules []string
	cut := func(a, b int) {
		rules = append(rules, fmt.Sprintf("ip saddr %s ip daddr %s counter drop", ip(a), ip(b)))
	}
	switch e.kind {
	case "halves", "isolate", "minority":
		for _, a := range e.sides[0] {
			for _, b := range e.sides[1] {
				cut(a, b)
				cut(b, a)
			}
		}
		gone, watchers = e.sides[0], e.sides[1]
	case "bridge":
		cut(e.sides[0][0], e.sides[2][0])
		cut(e.sides[2][0], e.sides[0][0])
	case "oneway":
		for j := range n.cfg.Nodes {
			if j != e.sides[0][0] {
				cut(e.sides[0][0], j)
			}
		}
		gone = e.sides[0]
	case "loss":
		rules = append(rules, fmt.Sprintf("ip saddr %s numgen random mod 1000 < %d counter drop", n.topo.subnet, e.param*10))
	case "bandwidth", "pause", "kill":
		gone = n.startNodeFault(ctx, e)
	}
	if len(rules) > 0 {
		if err := n.topo.setRules(ctx, rules); err != nil {
			n.logf("error: %v", err)
		}
	}
	if watchers == nil && gone != nil {
		for j := range n.cfg.Nodes {
			if !slices.Contains(gone, j) {
				watchers = append(watchers, j)
			}
		}
	}
	return gone, watchers
}

// startNodeFault starts a fault of one node (a bandwidth cap, a pause, a
// kill) and returns the nodes the others should drop (the paused or killed
// one).
func (n *nemesis) startNodeFault(ctx context.Context, e event) (gone []int) {
	var err error
	switch e.kind {
	case "bandwidth":
		err = n.topo.setRate(ctx, e.node, int64(e.param)*1_000_000)
	case "pause":
		err, gone = n.c.pause(e.node), []int{e.node}
	case "kill":
		err, gone = n.c.kill(e.node), []int{e.node}
	}
	if err != nil {
		n.logf("error: %v", err)
	}
	return gone
}

// watchGone measures the time until the watchers take the gone nodes off
// their ring, after which writes go to substitutes, and flags it past the
// detection bound. fctx ends with the fault; ctx is the run's.
func (n *nemesis) watchGone(ctx, fctx context.Context, e event, gone, watchers []int) {
	var goneIDs []string
	for _, g := range gone {
		goneIDs = append(goneIDs, n.ids[g])
	}
	d, ok := waitFor(fctx, e.dur, func(ctx context.Context) bool { return n.o.dropped(ctx, watchers, goneIDs) })
	if ctx.Err() != nil {
		return // interrupted: no measure
	}
	n.note(measure{what: fmt.Sprintf("%s: %s off the others' ring", e.kind, sidesString([][]int{gone})), d: d, ok: ok})
	if bound := n.detectBound(); bound >= 0 && e.dur > bound && (!ok || d > bound) {
		n.violate("%s: %s were not off the others' ring within %v (%.1fs)", e, sidesString([][]int{gone}), bound, d.Seconds())
	}
}

// watchLoss notes any node declared dead during random loss: no node may
// be declared dead for random loss alone.
func (n *nemesis) watchLoss(fctx context.Context, e event) {
	all := make([]int, n.cfg.Nodes)
	for j := range all {
		all[j] = j
	}
	d, dead := waitFor(fctx, e.dur, func(ctx context.Context) bool { return n.o.anyDead(ctx, all, n.ids) })
	if dead {
		n.logf("a node was declared dead %.1fs into %s", d.Seconds(), e)
		n.mu.Lock()
		n.measures = append(n.measures, measure{what: "dead under loss", d: d, ok: false})
		n.mu.Unlock()
	}
}

// heal ends fault e: rules flushed, caps removed, a paused node continued, a
// killed node restarted.
func (n *nemesis) heal(ctx context.Context, e event) {
	if err := n.topo.setRules(ctx, nil); err != nil {
		n.logf("error: %v", err)
	}
	switch e.kind {
	case "bandwidth":
		if err := n.topo.setRate(ctx, e.node, 0); err != nil {
			n.logf("error: %v", err)
		}
	case "pause":
		if err := n.c.resume(e.node); err != nil {
			n.logf("error: %v", err)
		}
	case "kill":
		if err := n.c.restart(e.node); err != nil {
			n.logf("error: %v", err)
		}
	}
}

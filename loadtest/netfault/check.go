package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/loadtest"
)

// checker judges the whole history once the schedule is over.
type checker struct {
	cfg   Config
	c     *cluster
	o     *observer
	h     *history
	n     *nemesis
	seeds []string
	log   func(string, ...any)
	elog  io.Writer
	base  []resources // every node's figures after the warm-up, engines connected and busy
}

// summary is the run's verdict; line prints it on one line.
type summary struct {
	Seed                 uint64  `json:"seed"`
	Nodes                int     `json:"nodes"`
	Replication          int     `json:"replication"`
	Acknowledged         int     `json:"acknowledged"`
	Lost                 int     `json:"lost"`
	LostR1Excused        int     `json:"lost_r1_holder_killed"`
	Corrupt              int64   `json:"corrupt"`
	LateCalls            int64   `json:"late_calls"`
	MaxOverrunMS         int64   `json:"max_overrun_ms"`
	PhantomHolders       int     `json:"phantom_holders"`
	Calls                int64   `json:"calls"`
	PutChunks            int64   `json:"put_chunks"`
	PutSuccess           float64 `json:"put_success"`
	Failed               int64   `json:"failed_chunks"`
	Degraded             int64   `json:"degraded_chunks"`
	GetMisses            int64   `json:"get_misses"`
	MaxDeclaredDeadS     float64 `json:"max_declared_dead_s"`
	DetectGoalS          float64 `json:"declared_dead_goal_s"`
	MaxConvergeS         float64 `json:"max_converge_s"`
	ConvergeGoalS        float64 `json:"converge_goal_s"`
	MaxStartupS          float64 `json:"max_restart_startup_s"`
	DeadUnderLoss        int     `json:"dead_under_loss"`
	Evictions            uint64  `json:"evictions"`
	GoroutineGrowth      float64 `json:"goroutine_growth"`
	FDGrowth             float64 `json:"fd_growth"`
	HeapGrowthMiB        float64 `json:"heap_growth_mib"`
	Phases               map[string]counts
	Violations           int      `json:"violations"`
	Details              []string `json:"details"`
	ResourceNodesChecked int      `json:"resource_nodes_checked"`
}

func (s summary) line() string {
	return fmt.Sprintf("acknowledged %d, lost %d, corrupt %d, late calls %d, phantom holders %d, put success %.2f%% (%d chunks, %d failed, %d degraded), "+
		"get misses %d, max overrun %dms, declared dead max %.1fs (goal %.1fs), converged max %.1fs (goal %.1fs), restart start-up max %.1fs, dead under loss %d, evictions %d, "+
		"growth goroutines %+.0f fds %+.0f heap %+.1fMiB (%d nodes), lost r1 after holder kill %d, violations %d",
		s.Acknowledged, s.Lost, s.Corrupt, s.LateCalls, s.PhantomHolders, 100*s.PutSuccess, s.PutChunks, s.Failed, s.Degraded,
		s.GetMisses, s.MaxOverrunMS, s.MaxDeclaredDeadS, s.DetectGoalS, s.MaxConvergeS, s.ConvergeGoalS, s.MaxStartupS, s.DeadUnderLoss, s.Evictions,
		s.GoroutineGrowth, s.FDGrowth, s.HeapGrowthMiB, s.ResourceNodesChecked, s.LostR1Excused, s.Violations)
}

// violate records a violation (the first 50 with their details).
func (s *summary) violate(format string, args ...any) {
	s.Violations++
	if len(s.Details) < 50 {
		s.Details = append(s.Details, fmt.Sprintf(format, args...))
	}
}

func (k *checker) check(ctx context.Context) summary {
	s := summary{Seed: k.cfg.Seed, Nodes: k.cfg.Nodes, Replication: k.cfg.Replication, ConvergeGoalS: k.n.convergeBound().Seconds(),
		DetectGoalS: k.n.detectBound().Seconds()}
	acks := k.takeHistory(&s)
	k.takeMeasures(&s)
	index := map[string]int{}
	for i := range k.cfg.Nodes {
		index[k.c.grpcAddr(i)] = i
	}
	latest := k.checkHolders(&s, acks, index)
	s.Acknowledged = len(latest)

	// The cluster converged after the last heal (the nemesis checked); read
	// every acknowledged chunk back, retrying misses until the settle bound.
	spaces := []space{{"netfault-main", k.cfg.Replication}, {"netfault-r1", 1}}
	missing, err := k.readBack(ctx, spaces, latest, &s.Corrupt, s.violate)
	if err != nil {
		s.violate("cannot read back: %v", err)
		return s
	}
	k.countLost(&s, missing, spaces, index)
	if ev, err := k.o.evictions(ctx); err == nil {
		s.Evictions = ev
		if ev > 0 {
			s.violate("nodes evicted %d chunks: raise -memory-limit (evicted chunks make lost ones ambiguous)", ev)
		}
	}
	k.growth(ctx, &s, s.violate)
	for _, name := range k.h.order {
		p := s.Phases[name]
		k.log("phase %-9s puts %6d chunks, success %.2f%% (failed %d, call failures %d chunks), gets %d (%d missed), late %d",
			name, p.PutChunks, 100*p.putSuccess(), p.Failed+p.Rejected, p.CallFailed, p.GetChunks, p.Missed, p.Late)
	}
	return s
}

// takeHistory copies the engines' history into s (its phases, totals and
// violations) and returns the acknowledgements.
func (k *checker) takeHistory(s *summary) []ack {
	h := k.h
	h.mu.Lock()
	acks := h.acks
	total := h.total
	s.Phases = map[string]counts{}
	for name, p := range h.phases {
		s.Phases[name] = *p
	}
	for _, v := range h.violations {
		s.violate("%s", v)
	}
	s.MaxOverrunMS = h.maxOver.Milliseconds()
	h.mu.Unlock()
	s.Corrupt, s.LateCalls, s.Calls, s.PutChunks = total.Corrupt, total.Late, total.Calls, total.PutChunks
	s.PutSuccess, s.Failed, s.Degraded, s.GetMisses = total.putSuccess(), total.Failed+total.CallFailed+total.Rejected, total.Degraded, total.Missed
	if s.LateCalls > 0 {
		s.violate("%d engine calls returned more than %v after their deadline (worst %dms)", s.LateCalls, lateGrace, s.MaxOverrunMS)
	}
	return acks
}

// takeMeasures copies the nemesis's violations and the worst of its
// measures (convergence, start-up, failure detection) into s.
func (k *checker) takeMeasures(s *summary) {
	k.n.mu.Lock()
	defer k.n.mu.Unlock()
	for _, v := range k.n.violations {
		s.violate("%s", v)
	}
	for _, m := range k.n.measures {
		switch {
		case strings.HasPrefix(m.what, "convergence"):
			s.MaxConvergeS = max(s.MaxConvergeS, m.d.Seconds())
		case strings.HasPrefix(m.what, "start-up"):
			s.MaxStartupS = max(s.MaxStartupS, m.d.Seconds())
		case m.what == "dead under loss":
			s.DeadUnderLoss++
		case m.ok:
			s.MaxDeclaredDeadS = max(s.MaxDeclaredDeadS, m.d.Seconds())
		}
	}
}

// checkHolders checks that every holder named for a write could answer
// during it (index maps a node's gRPC address to its number), and returns
// the latest acknowledgement of each chunk.
func (k *checker) checkHolders(s *summary, acks []ack, index map[string]int) map[client.ChunkID]ack {
	latest := map[client.ChunkID]ack{}
	for _, a := range acks {
		for _, addr := range a.holders {
			i, ok := index[addr]
			if !ok {
				s.PhantomHolders++
				s.violate("chunk %x reported %s on %q, which is no node", a.id[:8], a.status, addr)
				continue
			}
			if k.c.wasOut(i, a.from, a.to) {
				s.PhantomHolders++
				s.violate("chunk %x reported %s on n%d, which was killed or paused for the whole call (%s .. %s)",
					a.id[:8], a.status, i, a.from.Format("15:04:05.000"), a.to.Format("15:04:05.000"))
			}
		}
		latest[a.id] = a
	}
	return latest
}

// countLost counts the acknowledged chunks never read back as lost, but for
// those of the one-replica space whose holder was killed (excused).
func (k *checker) countLost(s *summary, missing map[client.ChunkID]ack, spaces []space, index map[string]int) {
	for id, a := range missing {
		if a.space == 1 {
			killed := false
			for _, addr := range a.holders {
				if i, ok := index[addr]; ok && k.c.everKilled(i) {
					killed = true
				}
			}
			if killed {
				s.LostR1Excused++
				continue
			}
		}
		s.Lost++
		s.violate("chunk %x (%s, acknowledged %s on %v at %s) is not readable after heal and settle",
			id[:8], spaces[a.space].name, a.status, a.holders, a.to.Format("15:04:05.000"))
	}
}

// readBack reads every chunk in acks back, retrying those not found until
// the settle bound, and returns those never found. Its clients are closed
// when it returns.
func (k *checker) readBack(ctx context.Context, spaces []space, latest map[client.ChunkID]ack, corrupt *int64, violate func(string, ...any)) (map[client.ChunkID]ack, error) {
	log := slog.New(slog.NewTextHandler(k.elog, nil))
	missing := map[client.ChunkID]ack{}
	for id, a := range latest {
		missing[id] = a
	}
	clients := make([]*client.Client, len(spaces))
	for si, sp := range spaces {
		cl, err := newClient(k.cfg, k.seeds, sp, log)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		waitFor(ctx, 10*time.Second, func(context.Context) bool { return cl.State().Status == client.ConnConnected })
		clients[si] = cl
	}
	deadline := time.Now().Add(k.cfg.Settle)
	for round := 0; len(missing) > 0; round++ {
		var lastErr error
		for si, cl := range clients {
			var ids []client.ChunkID
			for id, a := range missing {
				if a.space == si {
					ids = append(ids, id)
				}
			}
			for len(ids) > 0 {
				batch := ids[:min(64, len(ids))]
				ids = ids[len(batch):]
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := cl.Get(cctx, batch)
				cancel()
				if err != nil {
					lastErr = err
					continue
				}
				for _, r := range res {
					if !r.Found {
						continue
					}
					if !bytes.Equal(r.Data, loadtest.ChunkBytes(r.ID, k.cfg.ChunkSize)) {
						*corrupt++
						violate("final read of chunk %x from %s is corrupt", r.ID[:8], r.Holder.Addr)
					}
					delete(missing, r.ID)
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		k.log("final read round %d: %d chunks not found yet (last call error: %v); retrying", round+1, len(missing), lastErr)
		sleepCtx(ctx, 2*time.Second)
	}
	return missing, nil
}

// growth compares each node never restarted (a restart resets the figures)
// with itself after the warm-up. The engines' and the checker's clients are
// closed by now, so a node should be back to at most what it had then
// (then, it also served the engines' connections); it is given 30 s to get
// there.
func (k *checker) growth(ctx context.Context, s *summary, violate func(string, ...any)) {
	for i := range k.cfg.Nodes {
		b := k.base[i]
		if k.c.everKilled(i) || b.Goroutines == 0 {
			continue
		}
		var e resources
		waitFor(ctx, 30*time.Second, func(ctx context.Context) bool {
			var err error
			e, err = k.o.resources(ctx, i)
			return err == nil && e.Goroutines <= b.Goroutines+10 && e.FDs <= b.FDs+4
		})
		if e.Goroutines == 0 {
			continue
		}
		s.ResourceNodesChecked++
		s.GoroutineGrowth = max(s.GoroutineGrowth, e.Goroutines-b.Goroutines)
		s.FDGrowth = max(s.FDGrowth, e.FDs-b.FDs)
		s.HeapGrowthMiB = max(s.HeapGrowthMiB, (e.HeapInuse-b.HeapInuse)/(1<<20))
		k.log("n%d: goroutines %.0f -> %.0f, fds %.0f -> %.0f, heap in use %.1f -> %.1f MiB, rss %.1f -> %.1f MiB",
			i, b.Goroutines, e.Goroutines, b.FDs, e.FDs, b.HeapInuse/(1<<20), e.HeapInuse/(1<<20), b.RSS/(1<<20), e.RSS/(1<<20))
		if e.Goroutines > b.Goroutines+10 {
			violate("n%d's goroutines grew from %.0f to %.0f (engines disconnected)", i, b.Goroutines, e.Goroutines)
		}
		if e.FDs > b.FDs+4 {
			violate("n%d's open descriptors grew from %.0f to %.0f (engines disconnected)", i, b.FDs, e.FDs)
		}
		if e.HeapInuse > 2*b.HeapInuse+256<<20 {
			violate("n%d's heap in use grew from %.0f MiB to %.0f MiB", i, b.HeapInuse/(1<<20), e.HeapInuse/(1<<20))
		}
	}
}

package olricbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/loadtest"
)

// Engines makes one backend per worker ("engine") of a system under test.
type Engines struct {
	// Name names the system in results: "kvring" or "olric".
	Name string
	// New returns a fresh backend whose chunks live in namespace ns (a
	// kvring namespace, an Olric DMap).
	New func(ns string) (loadtest.Backend, error)
}

// KvringEngines returns Engines over the kvring nodes at addrs (each engine
// its own SDK client). readBufferBytes > 0 makes each engine read into one
// reused buffer of that many bytes (loadtest.KvringConfig.ReadBufferBytes,
// the SDK's GetInto), as an engine reads into its KV buffers; 0: a new
// buffer per value read, as Olric's client returns.
func KvringEngines(addrs []string, readBufferBytes int) Engines {
	return Engines{Name: "kvring", New: func(ns string) (loadtest.Backend, error) {
		k, err := loadtest.NewKvring(loadtest.KvringConfig{Seeds: addrs, Namespace: ns,
			Schema:          client.Schema{Model: "olricbench", Dtype: "bytes", TokensPerChunk: 16},
			ReadBufferBytes: readBufferBytes,
			Logger:          slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return nil, err
		}
		// The client connects and fetches its ring view in the background;
		// wait for both, as kvring bench waits for the connection, so the
		// first timed call neither waits nor goes through a coordinator
		// that is not the chunk's owner. (Olric's cluster client fetches
		// its routing table before it returns.)
		deadline := time.Now().Add(30 * time.Second)
		for k.Client().State().Status != client.ConnConnected {
			if time.Now().After(deadline) {
				k.Close()
				return nil, fmt.Errorf("cannot connect to kvring at %v: %s", addrs, k.Client().State().LastError)
			}
			time.Sleep(time.Millisecond)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := k.Client().RefreshRouting(ctx); err != nil {
			k.Close()
			return nil, fmt.Errorf("cannot fetch kvring's ring view from %v: %w", addrs, err)
		}
		return k, nil
	}}
}

// OlricEngines returns Engines over the Olric nodes at addrs (each engine
// its own cluster client).
func OlricEngines(addrs []string) Engines {
	return Engines{Name: "olric", New: func(ns string) (loadtest.Backend, error) {
		return NewBackend(BackendConfig{Addrs: addrs, DMap: ns})
	}}
}

// PhaseResult is one phase (all puts or all gets of one size) on one system.
type PhaseResult struct {
	System, Op string
	Size, Ops  int
	Elapsed    time.Duration
	Errors     int // failed calls and chunks not stored, not found or of the wrong length
	FirstError string
	P50, P99   time.Duration
}

// GBps is the phase's throughput in 10⁹ bytes per second.
func (r PhaseResult) GBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Size) * float64(r.Ops-r.Errors) / r.Elapsed.Seconds() / 1e9
}

// RunPerCall puts ops chunks of size bytes, one per call, with workers
// engines of e in parallel, then gets each of them once, one per call, and
// returns the two phases. The chunks' bytes derive from their ids (block
// numbers from block on) and are made before the clock starts; every 16th
// chunk read back is verified byte for byte, the others by length. Each
// engine makes a few untimed lookups first so connections are open (a kvring
// engine also has its ring view: KvringEngines), and each phase starts with a
// garbage collection (runPhase).
func RunPerCall(ctx context.Context, e Engines, ns string, block int64, size, ops, workers int) (put, get PhaseResult, err error) {
	ids := make([]loadtest.ChunkID, 0, ops)
	for b := block; len(ids) < ops; b++ {
		ids = append(ids, loadtest.BlockChunkIDs(b, 32)...)
	}
	ids = ids[:ops]
	data := make([][]byte, ops)
	for i, id := range ids {
		data[i] = loadtest.ChunkBytes(id, size)
	}
	engines := make([]loadtest.Backend, workers)
	defer func() {
		for _, b := range engines {
			if b != nil {
				b.Close()
			}
		}
	}()
	for w := range engines {
		if engines[w], err = e.New(ns); err != nil {
			return put, get, fmt.Errorf("cannot create a %s engine: %w", e.Name, err)
		}
		for i := range 8 {
			warm := loadtest.BlockChunkIDs(block-1-int64(w), 8)[i]
			if _, err := engines[w].Lookup(ctx, []loadtest.ChunkID{warm}, []loadtest.ChunkID{warm}); err != nil {
				return put, get, fmt.Errorf("%s warm-up lookup: %w", e.Name, err)
			}
		}
	}
	put = runPhase(ctx, engines, e.Name, "put", size, ops, func(b loadtest.Backend, i int) error {
		out, err := b.Put(ctx, []loadtest.Chunk{{ID: ids[i], Data: data[i], Group: ids[i]}})
		switch {
		case err != nil:
			return err
		case len(out) != 1 || !out[0].Held():
			return fmt.Errorf("put of chunk %d: %v", i, out)
		}
		return nil
	})
	get = runPhase(ctx, engines, e.Name, "get", size, ops, func(b loadtest.Backend, i int) error {
		out, err := b.Get(ctx, ids[i:i+1], ids[i:i+1])
		switch {
		case err != nil:
			return err
		case len(out) != 1 || !out[0].Found:
			return fmt.Errorf("chunk %d not found", i)
		case len(out[0].Data) != size || (i%16 == 0 && !loadtest.VerifyChunk(ids[i], out[0].Data)):
			return fmt.Errorf("chunk %d read back corrupt (%d bytes)", i, len(out[0].Data))
		}
		return nil
	})
	return put, get, ctx.Err()
}

// runPhase collects the process's garbage, then calls do for indices
// 0..ops-1, handed out to the engines in order, and times it.
func runPhase(ctx context.Context, engines []loadtest.Backend, system, op string, size, ops int,
	do func(b loadtest.Backend, i int) error) PhaseResult {
	var next, errs atomic.Int64
	var first atomic.Pointer[string]
	lat := make([]time.Duration, ops)
	var wg sync.WaitGroup
	// Both systems share this process's heap: collect the garbage the
	// previous phase left (the other system's, often) before the clock
	// starts, so no phase pays for another's.
	runtime.GC()
	start := time.Now()
	for _, b := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= ops {
					return
				}
				t0 := time.Now()
				if err := do(b, i); err != nil {
					errs.Add(1)
					msg := err.Error()
					first.CompareAndSwap(nil, &msg)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	r := PhaseResult{System: system, Op: op, Size: size, Ops: ops, Elapsed: time.Since(start), Errors: int(errs.Load())}
	if p := first.Load(); p != nil {
		r.FirstError = *p
	}
	slices.Sort(lat)
	r.P50, r.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	return r
}

// CompareConfig configures Compare. A zero field means its default.
type CompareConfig struct {
	// Sizes are the value sizes compared. Default 256 KiB and 2 MiB.
	Sizes []int
	// Ops is the number of puts (and gets) per size, system and round.
	// Default 128.
	Ops int
	// Workers is the number of engines calling in parallel. Default 4.
	Workers int
	// Rounds repeats the comparison; each round runs both systems, in
	// alternating order, on fresh ids. Default 3.
	Rounds int
}

// Row is one size and operation of one round, both systems side by side.
type Row struct {
	Round         int
	Op            string
	Size          int
	Kvring, Olric PhaseResult
}

// Ratio is kvring's throughput over Olric's (above 1: kvring is faster).
func (r Row) Ratio() float64 {
	if r.Olric.GBps() == 0 {
		return 0
	}
	return r.Kvring.GBps() / r.Olric.GBps()
}

// Compare runs the per-call comparison of kvring and olric: for each round
// and size, RunPerCall on each. It stops at the first error.
func Compare(ctx context.Context, kvring, olric Engines, cfg CompareConfig) ([]Row, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{256 << 10, 2 << 20}
	}
	if cfg.Ops == 0 {
		cfg.Ops = 128
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
	if cfg.Ops < 1 || cfg.Workers < 1 || cfg.Rounds < 1 {
		return nil, errors.New("ops, workers and rounds must be positive")
	}
	var rows []Row
	block := int64(1_000_000)
	for round := range cfg.Rounds {
		for _, size := range cfg.Sizes {
			ns := fmt.Sprintf("olricbench-r%d-%d", round, size)
			order := []Engines{kvring, olric}
			if round%2 == 1 {
				order = []Engines{olric, kvring}
			}
			res := map[string][2]PhaseResult{}
			for _, e := range order {
				put, get, err := RunPerCall(ctx, e, ns, block, size, cfg.Ops, cfg.Workers)
				if err != nil {
					return rows, fmt.Errorf("round %d, %d bytes: %w", round+1, size, err)
				}
				res[e.Name] = [2]PhaseResult{put, get}
			}
			block += int64(cfg.Ops/32 + 2 + cfg.Workers)
			for i, op := range []string{"put", "get"} {
				rows = append(rows, Row{Round: round + 1, Op: op, Size: size, Kvring: res[kvring.Name][i], Olric: res[olric.Name][i]})
			}
		}
	}
	return rows, nil
}

// WriteRows prints rows as a table.
func WriteRows(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "round\top\tsize\tkvring GB/s\tolric GB/s\tkvring/olric\tkvring p50\tolric p50\tkvring p99\tolric p99\terrors k/o")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%.3f\t%.2fx\t%s\t%s\t%s\t%s\t%d/%d\n", r.Round, r.Op, sizeName(r.Size),
			r.Kvring.GBps(), r.Olric.GBps(), r.Ratio(), ms(r.Kvring.P50), ms(r.Olric.P50), ms(r.Kvring.P99), ms(r.Olric.P99),
			r.Kvring.Errors, r.Olric.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		for _, p := range []PhaseResult{r.Kvring, r.Olric} {
			if p.FirstError != "" {
				fmt.Fprintf(w, "round %d %s %s %s: %d errors, the first: %s\n", r.Round, p.System, r.Op, sizeName(r.Size), p.Errors, p.FirstError)
			}
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func sizeName(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/loadtest"
)

// lateGrace is how far past its deadline a call may return before it counts
// as late: the time a canceled gRPC call takes to come back, not slack for
// work done after the deadline.
const lateGrace = 250 * time.Millisecond

// space is one namespace the engines write: the main one (the run's
// replication factor) and one with replication 1.
type space struct {
	name string
	r    int
}

// ack is a chunk the cluster acknowledged held.
type ack struct {
	id      client.ChunkID
	space   int
	holders []string // gRPC addresses
	from    time.Time
	to      time.Time
	status  client.PutStatus
}

// counts are the engines' tallies, for the whole run or one phase of it.
type counts struct {
	PutChunks, Stored, AlreadyHeld, Rejected, Failed, CallFailed int64
	Degraded                                                     int64
	Gets, GetChunks, Found, Missed, Corrupt                      int64
	Calls, Late                                                  int64
}

func (c *counts) add(o counts) {
	c.PutChunks += o.PutChunks
	c.Stored += o.Stored
	c.AlreadyHeld += o.AlreadyHeld
	c.Rejected += o.Rejected
	c.Failed += o.Failed
	c.CallFailed += o.CallFailed
	c.Degraded += o.Degraded
	c.Gets += o.Gets
	c.GetChunks += o.GetChunks
	c.Found += o.Found
	c.Missed += o.Missed
	c.Corrupt += o.Corrupt
	c.Calls += o.Calls
	c.Late += o.Late
}

// putSuccess is the share of chunks put that the cluster holds afterwards.
func (c counts) putSuccess() float64 {
	if c.PutChunks == 0 {
		return 1
	}
	return float64(c.Stored+c.AlreadyHeld) / float64(c.PutChunks)
}

// history is what the engines saw. Safe for concurrent use.
type history struct {
	mu         sync.Mutex
	acks       []ack
	phase      string
	phases     map[string]*counts
	order      []string
	total      counts
	maxOver    time.Duration
	violations []string
	nextID     atomic.Uint64
}

func newHistory() *history {
	return &history{phases: map[string]*counts{}}
}

// setPhase names the phase the following calls are tallied under.
func (h *history) setPhase(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.phase = name
	if _, ok := h.phases[name]; !ok {
		h.phases[name] = &counts{}
		h.order = append(h.order, name)
	}
}

func (h *history) record(c counts, acks []ack, over time.Duration, violations ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total.add(c)
	if p := h.phases[h.phase]; p != nil {
		p.add(c)
	}
	h.acks = append(h.acks, acks...)
	h.maxOver = max(h.maxOver, over)
	h.violations = append(h.violations, violations...)
}

// sample returns up to n acks of space s chosen by rng.
func (h *history) sample(rng *rand.Rand, s, n int) []ack {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ack
	for range 4 * n {
		if len(h.acks) == 0 || len(out) == n {
			break
		}
		a := h.acks[rng.IntN(len(h.acks))]
		if a.space == s {
			out = append(out, a)
		}
	}
	return out
}

// chunkID derives a chunk id from the run's seed and a counter, so a run's
// chunks are the same for the same seed and never met by another run.
func chunkID(seed, n uint64) client.ChunkID {
	var b [24]byte
	copy(b[:8], "netfault")
	binary.LittleEndian.PutUint64(b[8:], seed)
	binary.LittleEndian.PutUint64(b[16:], n)
	return sha256.Sum256(b[:])
}

// engines runs cfg.Engines engines until ctx ends; each makes cfg.Rate calls
// a second: puts of cfg.Batch new chunks (four in five into the main
// namespace) and gets of chunks acknowledged before, verified byte for byte.
type engines struct {
	cfg     Config
	spaces  []space
	clients [][]*client.Client // [engine][space]
	h       *history
	log     *slog.Logger
}

func newEngines(cfg Config, seeds []string, log *slog.Logger, h *history) (*engines, error) {
	e := &engines{cfg: cfg, h: h, log: log, spaces: []space{{"netfault-main", cfg.Replication}, {"netfault-r1", 1}}}
	for k := range cfg.Engines {
		// Engine k tries the nodes starting with node k, so the engines are
		// connected to (and take their ring view from) different nodes, on
		// either side of a partition.
		mine := append(slices.Clone(seeds[k%len(seeds):]), seeds[:k%len(seeds)]...)
		var cs []*client.Client
		for _, s := range e.spaces {
			c, err := newClient(cfg, mine, s, log)
			if err != nil {
				return nil, err
			}
			cs = append(cs, c)
		}
		e.clients = append(e.clients, cs)
	}
	return e, nil
}

func newClient(cfg Config, seeds []string, s space, log *slog.Logger) (*client.Client, error) {
	return client.New(client.Config{
		Conn:              client.ConnConfig{Seeds: seeds, Logger: log},
		Namespace:         s.name,
		Schema:            client.Schema{Model: "netfault", Dtype: "u8", TokensPerChunk: 16, Layout: "opaque", HashScheme: "netfault"},
		ReplicationFactor: uint32(s.r), MinReplicas: 1,
		CallTimeout: cfg.Deadline,
		Logger:      log,
	})
}

// connected reports whether every engine's clients are connected.
func (e *engines) connected() bool {
	for _, cs := range e.clients {
		for _, c := range cs {
			if c.State().Status != client.ConnConnected {
				return false
			}
		}
	}
	return true
}

// close closes every client; a second call does nothing.
func (e *engines) close() {
	for _, cs := range e.clients {
		for _, c := range cs {
			c.Close()
		}
	}
	e.clients = nil
}

func (e *engines) run(ctx context.Context) {
	var wg sync.WaitGroup
	for k := range e.clients {
		wg.Go(func() { e.loop(ctx, k) })
	}
	wg.Wait()
}

func (e *engines) loop(ctx context.Context, k int) {
	rng := rand.New(rand.NewPCG(e.cfg.Seed, uint64(k)+1))
	tick := time.NewTicker(time.Second / time.Duration(max(e.cfg.Rate, 1)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := 0
		if rng.IntN(5) == 0 {
			s = 1
		}
		if rng.IntN(4) == 0 {
			e.get(ctx, k, s, rng)
		} else {
			e.put(ctx, k, s)
		}
	}
}

// call runs f under the run's deadline and returns how far past the
// deadline it returned (0 when in time).
func (e *engines) call(ctx context.Context, f func(context.Context)) (start, end time.Time, over time.Duration) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.Deadline)
	defer cancel()
	start = time.Now()
	f(cctx)
	end = time.Now()
	return start, end, max(0, end.Sub(start)-e.cfg.Deadline)
}

func (e *engines) put(ctx context.Context, k, s int) {
	chunks := make([]client.Chunk, e.cfg.Batch)
	for i := range chunks {
		id := chunkID(e.cfg.Seed, e.h.nextID.Add(1))
		chunks[i] = client.Chunk{ID: id, Data: loadtest.ChunkBytes(id, e.cfg.ChunkSize)}
	}
	var res []client.PutResult
	var err error
	start, end, over := e.call(ctx, func(cctx context.Context) { res, err = e.clients[k][s].Put(cctx, chunks) })
	if ctx.Err() != nil {
		return // the run is over: not the cluster's doing
	}
	c := counts{Calls: 1, PutChunks: int64(len(chunks))}
	if over > lateGrace {
		c.Late = 1
	}
	var violations []string
	if err != nil {
		c.CallFailed = int64(len(chunks))
		e.h.record(c, nil, over)
		e.log.Warn("put failed", "engine", k, "namespace", e.spaces[s].name, "code", codeOf(err), "took", end.Sub(start), "err", err)
		return
	}
	var acks []ack
	for _, r := range res {
		switch r.Status {
		case client.Stored:
			c.Stored++
		case client.AlreadyHeld:
			c.AlreadyHeld++
		case client.Rejected:
			c.Rejected++
		default:
			c.Failed++
		}
		if r.Degraded {
			c.Degraded++
		}
		if r.Status == client.Failed && c.Failed <= 1 {
			e.log.Warn("chunk failed", "engine", k, "namespace", e.spaces[s].name, "reason", r.Reason)
		}
		if !r.Status.Held() {
			continue
		}
		if len(r.Holders) == 0 {
			violations = append(violations, fmt.Sprintf("chunk %x reported %s with no holder", r.ID[:8], r.Status))
		}
		a := ack{id: r.ID, space: s, from: start, to: end, status: r.Status}
		for _, h := range r.Holders {
			a.holders = append(a.holders, h.Addr)
		}
		acks = append(acks, a)
	}
	e.h.record(c, acks, over, violations...)
}

func (e *engines) get(ctx context.Context, k, s int, rng *rand.Rand) {
	want := e.h.sample(rng, s, 8)
	if len(want) == 0 {
		return
	}
	ids := make([]client.ChunkID, len(want))
	for i, a := range want {
		ids[i] = a.id
	}
	var res []client.GetResult
	var err error
	_, _, over := e.call(ctx, func(cctx context.Context) { res, err = e.clients[k][s].Get(cctx, ids) })
	if ctx.Err() != nil {
		return
	}
	c := counts{Calls: 1, Gets: 1, GetChunks: int64(len(ids))}
	if over > lateGrace {
		c.Late = 1
	}
	var violations []string
	if err == nil {
		for _, r := range res {
			if !r.Found {
				c.Missed++
				continue
			}
			c.Found++
			if !bytes.Equal(r.Data, loadtest.ChunkBytes(r.ID, e.cfg.ChunkSize)) {
				c.Corrupt++
				violations = append(violations, fmt.Sprintf("corrupt read of chunk %x from %s", r.ID[:8], r.Holder.Addr))
			}
		}
	} else {
		c.Missed += int64(len(ids))
		e.log.Warn("get failed", "engine", k, "namespace", e.spaces[s].name, "code", codeOf(err), "err", err)
	}
	e.h.record(c, nil, over, violations...)
}

// codeOf is the gRPC code of a call error, for the log.
func codeOf(err error) codes.Code {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return status.Code(err)
}

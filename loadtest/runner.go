package loadtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/loadtest/trace"
)

// Config configures a Mooncake replay. A zero field means its default.
type Config struct {
	// ChunkTokens is the number of tokens per chunk; each 512-token block is
	// split into 512/ChunkTokens chunks. Default 16. At most 512.
	ChunkTokens int
	// ChunksPerGroup is the placement group size the backend's namespace
	// declares (client.Schema.ChunksPerGroup): each chunk carries the id
	// of the first chunk of its run of ChunksPerGroup chunks in its prompt
	// as its group key. Default 0: every chunk is its own group.
	ChunksPerGroup int
	// BytesPerToken sets chunk sizes: tokens × BytesPerToken. Default 64
	// (1 KiB chunks of 16 tokens).
	BytesPerToken int
	// Speedup compresses the trace's arrival times: a request arriving at t
	// is sent at t/Speedup after the start. Default 100; negative sends
	// every request at once (as fast as the engines go).
	Speedup float64
	// MaxRequests bounds the replay to the first requests of the trace.
	// Default 0: all of them.
	MaxRequests int
	// Duration stops dispatching new requests once it has passed; requests
	// in progress finish. Default 0: no cap.
	Duration time.Duration
	// Stop, when closed, stops dispatching new requests as Duration does
	// (kvring bench closes it on the first SIGINT). Optional.
	Stop <-chan struct{}
	// BatchChunks caps the chunks in one Get or Put call. Default 512.
	BatchChunks int
	// LookupBatch caps the ids in one Lookup call; a longer prompt is looked
	// up piece by piece while every piece is fully held. Default 8192 (the
	// server's default --max-batch).
	LookupBatch int
	// Backend names the backend in the report; Namespace the namespace
	// (or key prefix) the backends use.
	Backend   string
	Namespace string
	// TimelineInterval is the length of the intervals of Report.Timeline.
	// Default 1s. Each interval costs 64 bytes per engine during the run.
	TimelineInterval time.Duration
	// ProgressInterval is how often OnProgress is called. Default 1s.
	ProgressInterval time.Duration
	// OnProgress, if set, is called every ProgressInterval and once more
	// when the engines have finished, always from the same goroutine of the
	// replay. It must not block.
	OnProgress func(Progress)
}

// Progress is a snapshot of a run in progress.
type Progress struct {
	Done, Total   int
	Elapsed       time.Duration
	ChunkHitRatio float64
	// Errors are the lookup, get and put calls that failed as a whole so
	// far; FailedChunks the put chunks that failed (those of failed put
	// calls included).
	Errors, FailedChunks int64
}

func (c Config) withDefaults() Config {
	if c.ChunkTokens == 0 {
		c.ChunkTokens = 16
	}
	if c.BytesPerToken == 0 {
		c.BytesPerToken = 64
	}
	if c.Speedup == 0 {
		c.Speedup = 100
	}
	if c.BatchChunks == 0 {
		c.BatchChunks = 512
	}
	if c.LookupBatch == 0 {
		c.LookupBatch = 8192
	}
	if c.TimelineInterval == 0 {
		c.TimelineInterval = time.Second
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = time.Second
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.ChunkTokens < 1 || c.ChunkTokens > trace.BlockTokens {
		errs = append(errs, fmt.Errorf("chunk tokens must be in [1, %d], got %d", trace.BlockTokens, c.ChunkTokens))
	}
	if c.BytesPerToken < 1 {
		errs = append(errs, fmt.Errorf("bytes per token must be positive, got %d", c.BytesPerToken))
	}
	if c.MaxRequests < 0 || c.Duration < 0 || c.BatchChunks < 0 || c.LookupBatch < 0 || c.ProgressInterval < 0 ||
		c.TimelineInterval < 0 {
		errs = append(errs, errors.New("max requests, duration, batch sizes, progress and timeline intervals must not be negative"))
	}
	return errors.Join(errs...)
}

// ReplayMooncake replays reqs (in slice order, Timestamp relative to the
// first) against backends: one simulated engine per backend, requests assigned
// round-robin, each engine serving its requests one at a time. Per request the
// engine looks up the ordered chunk ids, gets the held prefix (verifying every
// byte) and puts the chunks after the first one it could not use.
//
// A failed call does not stop the run: the engine carries on as a real one
// would (a failed lookup or get means recomputing and putting the chunks) and
// the report counts the failure, in its totals and in its timeline.
//
// It blocks until the run ends and returns its report. When ctx ends first the
// report covers what was done and the error is ctx's. It does not close the
// backends.
func ReplayMooncake(ctx context.Context, reqs []trace.Request, backends []Backend, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cannot run the replay: %w", err)
	}
	if len(backends) == 0 {
		return nil, errors.New("cannot run the replay: no backends")
	}
	if cfg.MaxRequests > 0 && cfg.MaxRequests < len(reqs) {
		reqs = reqs[:cfg.MaxRequests]
	}
	rep := &Report{Backend: cfg.Backend, Namespace: cfg.Namespace, Workload: "mooncake", Engines: len(backends), ChunkTokens: cfg.ChunkTokens,
		BytesPerToken: cfg.BytesPerToken, Speedup: cfg.Speedup, RequestsPlanned: len(reqs)}
	sum := trace.Stats(reqs)
	rep.IdealBlockHitRatio = sum.UnboundedHitRatio
	rep.IdealChunkHitRatio, rep.IdealTokenHitRatio = idealChunkRatios(reqs, cfg.ChunkTokens)

	r := newRun(cfg)
	queues := make([]chan trace.Request, len(backends))
	tallies := make([]tally, len(backends))
	start := time.Now()
	var wg sync.WaitGroup
	for i, b := range backends {
		tallies[i].timeline = timeline{start: start, interval: cfg.TimelineInterval}
		queues[i] = make(chan trace.Request, len(reqs)/len(backends)+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range queues[i] {
				if r.stopped.Load() || ctx.Err() != nil {
					continue
				}
				r.serve(ctx, b, req, &tallies[i])
			}
		}()
	}

	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if cfg.OnProgress != nil {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			t := time.NewTicker(cfg.ProgressInterval)
			defer t.Stop()
			for {
				select {
				case <-progressDone:
					cfg.OnProgress(r.progress(len(reqs), start))
					return
				case <-t.C:
					cfg.OnProgress(r.progress(len(reqs), start))
				}
			}
		}()
	}

	r.dispatch(ctx, reqs, queues, start)
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	close(progressDone)
	progressWG.Wait()

	rep.Elapsed = time.Since(start)
	rep.StartedAt = start.UTC().Round(0)
	rep.StoppedEarly = r.stopped.Load()
	var total tally
	for i := range tallies {
		total.merge(&tallies[i])
	}
	total.fill(rep)
	rep.MissingFoundLater, rep.MissingSample = r.recheckMissing(ctx, backends[0])
	rep.MissingFoundLater += r.foundAgain
	return rep, ctx.Err()
}

// run is the state the engines share.
type run struct {
	cfg          Config
	stopped      atomic.Bool // the duration cap passed
	done         atomic.Int64
	hits         atomic.Int64
	chunks       atomic.Int64
	errors       atomic.Int64 // failed calls
	failedChunks atomic.Int64

	mu sync.Mutex
	// ackedAt holds the chunks the backend acknowledged holding, each with
	// the instant the put call that acknowledged it returned.
	ackedAt map[chunkKey]time.Time
	// missedAt holds the chunks a call reported missing while no ack of
	// theirs was recorded, each with the instant the latest such call began:
	// an engine's ack is recorded a moment after its put returned, so a
	// call that began after the put returned may report its miss first.
	missedAt map[chunkKey]time.Time
	missing  map[chunkKey]PlannedChunk // reported missing after an ack, not acknowledged since
	// foundAgain counts chunks of missing a later put found already held.
	foundAgain int64

	// putBufs recycles the byte buffers of put batches (*[]byte): a fresh
	// 16 MiB batch per call costs the generator more in zeroing and GC
	// than in generating the bytes. A backend's Put reads the chunks only
	// until it returns.
	putBufs sync.Pool
}

func newRun(cfg Config) *run {
	return &run{cfg: cfg, ackedAt: make(map[chunkKey]time.Time), missedAt: make(map[chunkKey]time.Time),
		missing: make(map[chunkKey]PlannedChunk)}
}

func (r *run) progress(total int, start time.Time) Progress {
	return Progress{Done: int(r.done.Load()), Total: total, Elapsed: time.Since(start),
		ChunkHitRatio: ratio(r.hits.Load(), r.chunks.Load()), Errors: r.errors.Load(), FailedChunks: r.failedChunks.Load()}
}

// call records a call of kind op that began at begin and has just returned,
// and returns the timeline bucket it belongs to.
func (r *run) call(t *tally, op *opTally, begin time.Time, chunks, bytes int, err error) *timelineBucket {
	end := time.Now()
	op.record(end.Sub(begin), chunks, bytes, err)
	b := t.timeline.at(end)
	if err != nil {
		b.errors++
		r.errors.Add(1)
	}
	return b
}

// dispatch hands each request to its engine at its compressed arrival time.
func (r *run) dispatch(ctx context.Context, reqs []trace.Request, queues []chan trace.Request, start time.Time) {
	var deadline <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var t0 time.Duration
	if len(reqs) > 0 {
		t0 = reqs[0].Timestamp
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i, req := range reqs {
		if r.cfg.Speedup > 0 {
			at := time.Duration(float64(req.Timestamp-t0) / r.cfg.Speedup)
			if wait := at - time.Since(start); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-deadline:
					r.stopped.Store(true)
					return
				case <-r.cfg.Stop:
					r.stopped.Store(true)
					return
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case <-deadline:
			r.stopped.Store(true)
			return
		case <-r.cfg.Stop:
			r.stopped.Store(true)
			return
		case <-ctx.Done():
			return
		default:
		}
		queues[i%len(queues)] <- req
	}
	if deadline != nil || r.cfg.Stop != nil {
		// Stop the engines' backlog at the cap too.
		go func() {
			select {
			case <-deadline:
				r.stopped.Store(true)
			case <-r.cfg.Stop:
				r.stopped.Store(true)
			case <-ctx.Done():
			}
		}()
	}
}

// serve runs one request on one engine.
func (r *run) serve(ctx context.Context, b Backend, req trace.Request, t *tally) {
	plan := PlanRequest(req, r.cfg.ChunkTokens)
	ids := make([]ChunkID, len(plan))
	for i, c := range plan {
		ids[i] = c.ID
	}
	groups := client.GroupKeys(ids, r.cfg.ChunksPerGroup)
	for i := range plan {
		plan[i].Group = groups[i]
	}
	held := r.lookup(ctx, b, plan, ids, groups, t)
	usable := r.getHeld(ctx, b, plan, ids, groups, held, t)
	for lo := usable; lo < len(plan); lo += r.cfg.BatchChunks {
		r.putBatch(ctx, b, plan[lo:min(lo+r.cfg.BatchChunks, len(plan))], t)
	}
	r.countRequest(plan, usable, t)
}

// lookup asks for the held prefix of the request's chunks, in pieces of
// LookupBatch ids, and returns it. After a failed lookup the engine knows no
// more, and nothing was reported missing; otherwise the first chunk not held
// is checked against the acknowledged ones (lost).
func (r *run) lookup(ctx context.Context, b Backend, plan []PlannedChunk, ids, groups []ChunkID, t *tally) int {
	held, answered := 0, true
	var lookupBegin time.Time // when the lookup that answered "not held" began
	for lo := 0; lo < len(ids) && held == lo; lo += r.cfg.LookupBatch {
		hi := min(lo+r.cfg.LookupBatch, len(ids))
		begin := time.Now()
		n, err := b.Lookup(ctx, ids[lo:hi], groups[lo:hi])
		r.call(t, &t.lookup, begin, hi-lo, 0, err)
		if err != nil || n < 0 || n > hi-lo {
			answered = false
			break
		}
		held += n
		if held < hi {
			lookupBegin = begin
		}
	}
	if answered && held < len(plan) {
		r.lost(plan[held], lookupBegin, t)
	}
	return held
}

// getHeld gets the held prefix and returns the usable prefix: it ends at the
// first chunk that does not come back intact.
func (r *run) getHeld(ctx context.Context, b Backend, plan []PlannedChunk, ids, groups []ChunkID, held int, t *tally) int {
	usable := 0
	for lo := 0; lo < held && usable == lo; lo += r.cfg.BatchChunks {
		hi := min(lo+r.cfg.BatchChunks, held)
		begin := time.Now()
		got, err := b.Get(ctx, ids[lo:hi], groups[lo:hi])
		n := 0
		for _, g := range got {
			n += len(g.Data)
		}
		tb := r.call(t, &t.get, begin, hi-lo, n, err)
		if err != nil || len(got) != hi-lo {
			break
		}
		tb.getBytes += int64(n)
		for i, g := range got {
			c := plan[lo+i]
			switch {
			case !g.Found:
				t.getMisses++
				r.lost(c, begin, t)
			case len(g.Data) != c.Tokens*r.cfg.BytesPerToken || !VerifyChunk(c.ID, g.Data):
				t.corrupt++
			case usable == lo+i:
				usable++
			}
		}
	}
	return usable
}

// putBatch puts one batch of chunks (their bytes derived from their ids)
// and records each outcome.
func (r *run) putBatch(ctx context.Context, b Backend, batch []PlannedChunk, t *tally) {
	size := 0
	for _, c := range batch {
		size += c.Tokens * r.cfg.BytesPerToken
	}
	bp, _ := r.putBufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < size {
		b := make([]byte, size)
		bp = &b
	}
	buf := (*bp)[:size]
	chunks := make([]Chunk, 0, len(batch))
	for _, c := range batch {
		n := c.Tokens * r.cfg.BytesPerToken
		fillChunk(c.ID, buf[:n])
		chunks = append(chunks, Chunk{ID: c.ID, Data: buf[:n:n], Group: c.Group})
		buf = buf[n:]
	}
	begin := time.Now()
	outs, err := b.Put(ctx, chunks)
	ackAt := time.Now() // the put's acks happened by now
	r.putBufs.Put(bp)
	tb := r.call(t, &t.put, begin, len(batch), size, err)
	if err != nil || len(outs) != len(chunks) {
		t.byOutcome[Failed] += int64(len(chunks))
		tb.failed += int64(len(chunks))
		r.failedChunks.Add(int64(len(chunks)))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, o := range outs {
		if o < Stored || o > Failed {
			o = Failed
		}
		t.byOutcome[o]++
		switch {
		case o.Held():
			r.ackLocked(batch[i], o, ackAt, t)
			tb.putBytes += int64(len(chunks[i].Data))
		case o == Rejected:
			tb.rejected++
		default:
			tb.failed++
			r.failedChunks.Add(1)
		}
		if !o.Held() && t.firstChunkFailure == "" {
			if fr, ok := b.(interface{ ChunkFailure() string }); ok {
				t.firstChunkFailure = fr.ChunkFailure()
			}
		}
	}
}

// countRequest counts a served request, its chunks and its hits (the
// usable prefix).
func (r *run) countRequest(plan []PlannedChunk, usable int, t *tally) {
	t.requests++
	t.chunks += int64(len(plan))
	t.chunkHits += int64(usable)
	for i, c := range plan {
		t.tokens += int64(c.Tokens)
		if i < usable {
			t.tokenHit += int64(c.Tokens)
		}
	}
	tb := t.timeline.at(time.Now())
	tb.requests++
	tb.chunks += int64(len(plan))
	tb.hits += int64(usable)
	r.done.Add(1)
	r.chunks.Add(int64(len(plan)))
	r.hits.Add(int64(usable))
}

// maxRecheck bounds the lookups recheckMissing makes.
const maxRecheck = 100_000

// recheckMissing looks up, one by one, the chunks reported missing after an
// ack and not acknowledged since, and returns how many are held now (those
// were unreachable for a while, not lost) and up to 20 of the others, with
// the error of their lookup if it failed. Stops early when ctx ends.
func (r *run) recheckMissing(ctx context.Context, b Backend) (found int64, sample []string) {
	r.mu.Lock()
	var todo []PlannedChunk
	for _, c := range r.missing {
		if len(todo) == maxRecheck {
			break
		}
		todo = append(todo, c)
	}
	r.mu.Unlock()
	for _, c := range todo {
		if ctx.Err() != nil {
			break
		}
		n, err := b.Lookup(ctx, []ChunkID{c.ID}, []ChunkID{c.Group})
		switch {
		case err == nil && n == 1:
			found++
		case len(sample) < 20:
			s := fmt.Sprintf("%d/%d %s", c.Block, c.Index, c.ID)
			if err != nil {
				s += " (lookup failed: " + err.Error() + ")"
			}
			sample = append(sample, s)
		}
	}
	return found, sample
}

// lost notes that a call that began at began reported c missing. When the
// backend had acknowledged c before that call began, that is a loss to
// explain (by an eviction, or not), counted once until c is acknowledged
// again. A call that began before the ack may rightly have missed c (it
// raced with the put), so it counts for nothing.
func (r *run) lost(c PlannedChunk, began time.Time, t *tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := c.key()
	at, ok := r.ackedAt[k]
	if !ok {
		// No ack recorded yet; one may be recorded with an earlier instant.
		if prev, seen := r.missedAt[k]; !seen || began.After(prev) {
			r.missedAt[k] = began
		}
		return
	}
	if !began.Before(at) {
		r.missedAfterAckLocked(c, t)
	}
}

// ackLocked records that the backend acknowledged holding c (o is Stored or
// AlreadyHeld) in a put call that returned at at. A miss already reported by
// a call that began at or after at is a loss after the ack. r.mu must be held.
func (r *run) ackLocked(c PlannedChunk, o PutOutcome, at time.Time, t *tally) {
	k := c.key()
	if _, ok := r.missing[k]; ok {
		delete(r.missing, k)
		if o == AlreadyHeld {
			// Missing earlier, held all along: it was unreachable.
			r.foundAgain++
		}
	}
	missed, ok := r.missedAt[k]
	delete(r.missedAt, k)
	if ok && !missed.Before(at) {
		r.missedAfterAckLocked(c, t)
		return
	}
	if _, ok := r.ackedAt[k]; !ok { // the first ack since the last miss counts
		r.ackedAt[k] = at
	}
}

// missedAfterAckLocked counts c missing after its ack and forgets the ack.
// r.mu must be held.
func (r *run) missedAfterAckLocked(c PlannedChunk, t *tally) {
	delete(r.ackedAt, c.key())
	r.missing[c.key()] = c
	t.missingAfterAck++
}

// idealChunkRatios returns the chunk and token hit ratios of an unbounded
// cache over reqs: a chunk hits when its id was referenced before.
func idealChunkRatios(reqs []trace.Request, chunkTokens int) (chunk, token float64) {
	seen := make(map[chunkKey]struct{})
	var chunks, hits, tokens, tokenHits int64
	for _, req := range reqs {
		for i, block := range req.HashIDs {
			bt := req.BlockTokenCount(i)
			for j := 0; j*chunkTokens < bt; j++ {
				n := int64(min(chunkTokens, bt-j*chunkTokens))
				k := chunkKey{block, int32(j)}
				chunks++
				tokens += n
				if _, ok := seen[k]; ok {
					hits++
					tokenHits += n
				} else {
					seen[k] = struct{}{}
				}
			}
		}
	}
	return ratio(hits, chunks), ratio(tokenHits, tokens)
}

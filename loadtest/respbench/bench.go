package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// op is one test: SET or GET.
type op int

const (
	opSet op = iota
	opGet
)

func parseTest(t string) (op, error) {
	switch t {
	case "set":
		return opSet, nil
	case "get":
		return opGet, nil
	}
	return 0, fmt.Errorf("unknown test %q (set, get)", t)
}

func (p op) String() string { return [...]string{"SET", "GET"}[p] }

// result is one test over all connections.
type result struct {
	op                op
	requests, hits    int
	redirects, errors int
	elapsed           time.Duration
	cpu               time.Duration // this process's CPU time (user and system) over the test
	p50, p99          time.Duration
}

// line is the test's output line, led by redis-benchmark's -q shape.
func (r result) line(size int) string {
	secs := r.elapsed.Seconds()
	s := fmt.Sprintf("%s: %.2f requests per second, %.2f GB/s, p50=%.3f msec p99=%.3f msec, client CPU %.1f us/request",
		r.op, float64(r.requests)/secs, float64(r.requests)*float64(size)/secs/1e9,
		float64(r.p50.Microseconds())/1e3, float64(r.p99.Microseconds())/1e3,
		float64(r.cpu.Microseconds())/float64(max(r.requests, 1)))
	if r.op == opGet {
		s += fmt.Sprintf(", hits %d of %d", r.hits, r.requests)
	}
	if r.redirects > 0 {
		s += fmt.Sprintf(", %d MOVED", r.redirects)
	}
	if r.errors > 0 {
		s += fmt.Sprintf(", %d error answers", r.errors)
	}
	return s
}

// processCPU is the CPU time this process has used (user and system), or 0
// when the kernel does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// worker is one client: its connections (one per server), its key draw and
// its latencies; only its own goroutine uses it during a test.
type worker struct {
	rt    *router
	o     options
	value []byte
	conns map[string]*rconn
	rng   *rand.Rand
	lat   []time.Duration
	res   result
}

// runTest runs o.requests of p over o.clients workers, one goroutine each,
// and waits for all of them.
func runTest(ctx context.Context, rt *router, o options, p op) (result, error) {
	value := make([]byte, o.size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	workers := make([]*worker, o.clients)
	for i := range workers {
		workers[i] = &worker{rt: rt, o: o, value: value, conns: map[string]*rconn{},
			rng: rand.New(rand.NewPCG(uint64(i), uint64(p)))}
	}
	defer func() {
		for _, w := range workers {
			for _, c := range w.conns {
				c.close()
			}
		}
	}()
	var next atomic.Int64
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	for i, w := range workers {
		wg.Go(func() { errs[i] = w.loop(ctx, p, &next) })
	}
	wg.Wait()
	total := result{op: p, elapsed: time.Since(start), cpu: processCPU() - cpu0}
	var lat []time.Duration
	for i, w := range workers {
		if errs[i] != nil {
			return result{}, errs[i]
		}
		total.requests += w.res.requests
		total.hits += w.res.hits
		total.redirects += w.res.redirects
		total.errors += w.res.errors
		lat = append(lat, w.lat...)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		total.p50, total.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return total, nil
}

// loop takes requests off next until o.requests are taken or ctx ends.
func (w *worker) loop(ctx context.Context, p op, next *atomic.Int64) error {
	for next.Add(1) <= int64(w.o.requests) {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := fmt.Sprintf("key:%012d", w.rng.IntN(w.o.keys))
		start := time.Now()
		if err := w.one(p, key); err != nil {
			return err
		}
		w.lat = append(w.lat, time.Since(start))
		w.res.requests++
	}
	return nil
}

// maxRedirects bounds the -MOVED answers one request follows.
const maxRedirects = 5

// one sends one request for key, following -MOVED, and counts its answer.
func (w *worker) one(p op, key string) error {
	addr := w.rt.addr(key)
	for range maxRedirects + 1 {
		c, err := w.conn(addr)
		if err != nil {
			return err
		}
		var r reply
		if p == opSet {
			r, err = c.do(w.value, "SET", key)
		} else {
			r, err = c.do(nil, "GET", key)
		}
		if err != nil {
			return fmt.Errorf("%s %s at %s: %w", p, key, addr, err)
		}
		if r.kind != replyMoved {
			w.count(p, key, r)
			return nil
		}
		w.res.redirects++
		if addr, err = w.rt.moved(r.msg); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s %s: more than %d MOVED answers", p, key, maxRedirects)
}

// count records an answer; an error answer, or a value of another length
// than -d, is an error, the first few printed.
func (w *worker) count(p op, key string, r reply) {
	bad := ""
	switch {
	case r.kind == replyError:
		bad = r.msg
	case p == opGet && r.kind == replyValue && r.n != w.o.size:
		bad = fmt.Sprintf("value of %d bytes, %d expected", r.n, w.o.size)
	case p == opGet && r.kind == replyValue:
		w.res.hits++
	}
	if bad == "" {
		return
	}
	if w.res.errors < 3 {
		fmt.Fprintf(os.Stderr, "error: %s %s: %s\n", p, key, bad)
	}
	w.res.errors++
}

// conn returns the worker's connection to addr, dialling it the first time.
func (w *worker) conn(addr string) (*rconn, error) {
	if c := w.conns[addr]; c != nil {
		return c, nil
	}
	c, err := dial(addr, w.o.reqTimeout)
	if err != nil {
		return nil, err
	}
	w.conns[addr] = c
	return c, nil
}

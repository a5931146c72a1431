// Command restart measures how long one kvring node takes to come back with
// what it held: it starts the node, fills it with -chunks values of -size
// bytes through the Redis port, stops it (SIGTERM, or SIGKILL), starts it
// again on the same data, shared-memory and disk directories, and prints per
// round the time the node took to exit, the time from start to ready
// (/readyz) and to its first hit (a GET of a filled key returns its bytes),
// and how many values it kept: every value is read back after each start,
// and one with other bytes ends the run with an error.
//
//	go build -o .bin/kvring ./cmd/kvring
//	go run ./loadtest/restart --kvring .bin/kvring --chunks 1000000 --size 4096 --signal TERM
//
// Everything it starts listens on 127.0.0.1 and is stopped when it ends; its
// directories (shared memory under /dev/shm) are removed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// options are the command's flags.
type options struct {
	kvring  string
	chunks  int
	size    int
	memory  string
	signal  string
	rounds  int
	conns   int
	pipe    int
	extra   string
	logPath string
}

func main() {
	var o options
	flag.StringVar(&o.kvring, "kvring", ".bin/kvring", "the kvring binary")
	flag.IntVar(&o.chunks, "chunks", 100_000, "values written before the first stop")
	flag.IntVar(&o.size, "size", 4096, "bytes per value")
	flag.StringVar(&o.memory, "memory-limit", "", "the node's --memory-limit (default: twice the values' bytes, at least 1GiB)")
	flag.StringVar(&o.signal, "signal", "TERM", "how the node is stopped: TERM (a drain) or KILL")
	flag.IntVar(&o.rounds, "rounds", 2, "stop-and-start rounds after the fill")
	flag.IntVar(&o.conns, "conns", 8, "connections that fill the node")
	flag.IntVar(&o.pipe, "pipeline", 64, "SETs in flight per connection")
	flag.StringVar(&o.extra, "flags", "", "more `kvring serve` flags, space-separated (e.g. \"--disk-dir /var/tmp/d --disk-limit 12GiB\")")
	flag.StringVar(&o.logPath, "log", "", "append the node's log here (default: a file in its directory, removed with it)")
	flag.Parse()
	redis.SetLogger(quiet{})
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
}

// run fills one node and restarts it o.rounds times, printing a line per
// round.
func run(ctx context.Context, o options) error {
	sig := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL}[strings.ToUpper(o.signal)]
	if sig == 0 {
		return fmt.Errorf("--signal %q: want TERM or KILL", o.signal)
	}
	n, err := newNode(o)
	if err != nil {
		return err
	}
	defer n.remove()
	if _, err := n.start(ctx); err != nil {
		return err
	}
	began := time.Now()
	if err := fill(ctx, n.respAddr, o); err != nil {
		return err
	}
	held, err := readBack(ctx, n.respAddr, o)
	if err != nil {
		return err
	}
	fmt.Printf("filled %d values of %d bytes in %.1f s; %d read back\n", o.chunks, o.size, time.Since(began).Seconds(), held)
	for r := range o.rounds {
		if err := round(ctx, n, sig, o, r+1); err != nil {
			return err
		}
	}
	return nil
}

// round stops the node with sig, starts it again and prints what it measured.
func round(ctx context.Context, n *node, sig syscall.Signal, o options, r int) error {
	exit, err := n.stop(sig)
	if err != nil {
		return err
	}
	started := time.Now()
	type hitResult struct {
		d   time.Duration
		err error
	}
	hitc := make(chan hitResult, 1)
	respAddr := n.respAddr // the restart keeps it
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		d, err := firstHit(hctx, respAddr, o, started)
		hitc <- hitResult{d, err}
	}()
	ready, err := n.start(ctx)
	if err != nil {
		cancel()
	}
	hit := <-hitc
	if err != nil {
		return err
	}
	if hit.err != nil {
		return hit.err
	}
	kept, err := readBack(ctx, n.respAddr, o)
	if err != nil {
		return err
	}
	fmt.Printf("round %d (SIG%s): exit %.2f s, ready %.2f s, first hit %.2f s after start; %d of %d values kept, byte-exact\n",
		r, strings.ToUpper(o.signal), exit.Seconds(), ready.Seconds(), hit.d.Seconds(), kept, o.chunks)
	return nil
}

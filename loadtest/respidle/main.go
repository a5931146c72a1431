// Command respidle measures what idle Redis-protocol connections cost a
// kvring node, against redis-server in the same run: it opens N idle
// connections that each send one PING and reports the server's resident
// memory (VmRSS) per connection, after a settle (kvring is made to collect
// its garbage, which also shrinks goroutine stacks); it runs active clients
// (SET then GET of a new key, 4 KiB values) for a bounded time, after a
// warm-up, alternately without the crowd and with it, and reports the
// throughput with the crowd as a ratio to the runs without around it; and it starts a node
// with a small --resp-max-conns, fills it, and checks that the connection
// past the cap is answered "-ERR max number of clients reached" while the
// admitted ones are still served.
//
//	go build -o /tmp/kvring ./cmd/kvring && go run ./loadtest/respidle --kvring /tmp/kvring
//
// It raises its RLIMIT_NOFILE (inherited by the servers it starts) to fit
// the crowd. Every process it starts is stopped before it returns.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	kvring, redis string
	idle          int
	clients, size int
	duration      time.Duration
	reps          int
	cap           int
	memory        string
}

func main() {
	var o options
	flag.StringVar(&o.kvring, "kvring", "", "kvring binary (required)")
	flag.StringVar(&o.redis, "redis-server", "redis-server", `redis-server binary for the peer; "" skips it`)
	flag.IntVar(&o.idle, "idle", 10000, "idle connections to open")
	flag.IntVar(&o.clients, "clients", 16, "active clients")
	flag.IntVar(&o.size, "size", 4096, "value size of the active clients' SETs and GETs, bytes")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of each active run")
	flag.IntVar(&o.reps, "reps", 3, "runs with the crowd (each between two without)")
	flag.IntVar(&o.cap, "cap", 100, "--resp-max-conns of the node the cap is checked on")
	flag.StringVar(&o.memory, "memory", "1GiB", "kvring's --memory-limit")
	flag.Parse()
	if o.kvring == "" {
		fmt.Fprintln(os.Stderr, "respidle: --kvring is required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "respidle:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if err := raiseNoFile(uint64(o.idle + o.cap + 1024)); err != nil {
		return err
	}
	fmt.Printf("idle=%d clients=%d size=%d duration=%s reps=%d\n", o.idle, o.clients, o.size, o.duration, o.reps)
	starts := []func() (*server, error){func() (*server, error) {
		return startKvring(o.kvring, o.memory, "--resp-max-conns", fmt.Sprint(o.idle+o.clients+64))
	}}
	if o.redis != "" {
		starts = append(starts, func() (*server, error) { return startRedis(o.redis, o.idle+o.clients+64) })
	}
	for _, start := range starts {
		s, err := start()
		if err != nil {
			return err
		}
		err = measure(o, s)
		s.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return checkCap(o)
}

// measure prints the server's RSS per idle connection and the active
// clients' throughput with the crowd against without: after a warm-up,
// o.reps rounds of a run without the crowd and one with it, and a last run
// without; each run with the crowd is compared with the mean of the runs
// without just before and after it (the machine's load drifts), and the
// median of those ratios is reported.
func measure(o options, s *server) error {
	if _, err := activeLoad(s.addr, o.clients, o.size, o.duration, "w"); err != nil { // warm-up, not counted
		return err
	}
	var without, with []float64
	var perConn float64
	for i := range o.reps {
		rate, err := activeLoad(s.addr, o.clients, o.size, o.duration, fmt.Sprintf("a%d", i))
		if err != nil {
			return err
		}
		without = append(without, rate)
		per, rate, err := withCrowd(o, s, i)
		if err != nil {
			return err
		}
		if i == 0 {
			perConn = per
		}
		with = append(with, rate)
	}
	rate, err := activeLoad(s.addr, o.clients, o.size, o.duration, "z")
	if err != nil {
		return err
	}
	without = append(without, rate)
	ratios := make([]float64, len(with))
	for i, w := range with {
		ratios[i] = w / ((without[i] + without[i+1]) / 2)
	}
	fmt.Printf("%-12s %.2f KiB per idle connection; active req/s without %.0f, with %.0f: ratio %.3f (median of %.3f)\n",
		s.name, perConn/1024, without, with, median(ratios), ratios)
	return nil
}

// withCrowd opens the idle crowd, measures the server's RSS per idle
// connection (after a settle), runs the active clients beside it, and
// closes it.
func withCrowd(o options, s *server, round int) (perConn, rate float64, err error) {
	s.settle()
	rss0, err := s.rss()
	if err != nil {
		return 0, 0, err
	}
	crowd, err := openIdle(s.addr, o.idle)
	if err != nil {
		return 0, 0, err
	}
	defer closeAll(crowd)
	if err := s.settle(); err != nil {
		return 0, 0, err
	}
	rss1, err := s.rss()
	if err != nil {
		return 0, 0, err
	}
	fmt.Printf("%-12s round %d: RSS %.1f -> %.1f MiB with %d idle connections: %.2f KiB each\n", s.name, round,
		float64(rss0)/(1<<20), float64(rss1)/(1<<20), o.idle, float64(rss1-rss0)/float64(o.idle)/1024)
	rate, err = activeLoad(s.addr, o.clients, o.size, o.duration, fmt.Sprintf("b%d", round))
	if err != nil {
		return 0, 0, err
	}
	closeAll(crowd)
	if err := awaitDrained(s.addr); err != nil {
		return 0, 0, err
	}
	s.settle()
	return float64(rss1-rss0) / float64(o.idle), rate, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// checkCap fills a node started with --resp-max-conns o.cap and checks the
// reply of the connection past it and that the admitted ones are served.
func checkCap(o options) error {
	s, err := startKvring(o.kvring, o.memory, "--resp-max-conns", fmt.Sprint(o.cap))
	if err != nil {
		return err
	}
	defer s.stop()
	reply, open, err := overCap(s.addr, o.cap)
	if err != nil {
		return err
	}
	defer closeAll(open)
	served := 0
	for _, c := range open {
		if ping(c) == nil {
			served++
		}
	}
	fmt.Printf("cap %d: %d admitted, the next answered %q; %d of the admitted served a PING after it\n",
		o.cap, len(open), reply, served)
	if reply != "-ERR max number of clients reached\r\n" || len(open) != o.cap || served != o.cap {
		return fmt.Errorf("the cap of %d connections was not kept as promised", o.cap)
	}
	return nil
}

// raiseNoFile raises this process's descriptor limit (and so the servers'
// it starts) to at least n.
func raiseNoFile(n uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= n {
		return nil
	}
	l.Cur = n
	l.Max = max(l.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("cannot raise RLIMIT_NOFILE to %d: %w", n, err)
	}
	return nil
}

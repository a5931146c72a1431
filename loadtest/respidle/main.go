// Command respidle measures what idle Redis-protocol connections cost a
// kvring node, against redis-server in the same run: it opens N idle
// connections that each send one PING and reports the server's resident
// memory (VmRSS) per connection, after a settle (kvring is made to collect
// its garbage, which also shrinks goroutine stacks); it runs active clients
// (SET then GET of a new key, 4 KiB values) for a bounded time, after a
// warm-up, without the crowd, with it and without it again, and reports
// the throughput with the crowd as a ratio to the mean of the runs without; and it starts a node
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
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	kvring, redis string
	idle          int
	clients, size int
	duration      time.Duration
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
	fmt.Printf("idle=%d clients=%d size=%d duration=%s\n", o.idle, o.clients, o.size, o.duration)
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
// clients' throughput with the crowd against without.
func measure(o options, s *server) error {
	if _, err := activeLoad(s.addr, o.clients, o.size, o.duration/2, "w"); err != nil { // warm-up, not counted
		return err
	}
	before, err := activeLoad(s.addr, o.clients, o.size, o.duration, "a")
	if err != nil {
		return err
	}
	s.settle()
	rss0, err := s.rss()
	if err != nil {
		return err
	}
	crowd, err := openIdle(s.addr, o.idle)
	if err != nil {
		return err
	}
	defer closeAll(crowd)
	if err := s.settle(); err != nil {
		return err
	}
	rss1, err := s.rss()
	if err != nil {
		return err
	}
	with, err := activeLoad(s.addr, o.clients, o.size, o.duration, "b")
	if err != nil {
		return err
	}
	closeAll(crowd)
	after, err := activeLoad(s.addr, o.clients, o.size, o.duration, "c")
	if err != nil {
		return err
	}
	per := float64(rss1-rss0) / float64(o.idle) / 1024
	fmt.Printf("%-12s RSS %.1f -> %.1f MiB: %.2f KiB per idle connection; active req/s without %.0f, with %.0f, without %.0f: ratio %.3f\n",
		s.name, float64(rss0)/(1<<20), float64(rss1)/(1<<20), per, before, with, after, with/((before+after)/2))
	return nil
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

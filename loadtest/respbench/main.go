// Command respbench drives a Redis-protocol server the way redis-benchmark
// does (-c connections, -n requests per test, -d bytes per value, keys
// key:NNNNNNNNNNNN drawn from -r, tests set and get, one request in flight
// per connection), with a client that is not the bottleneck at large
// values: each connection reads a reply's value straight into a buffer it
// reuses (bufio hands reads larger than its buffer to the socket), and a
// SET writes its value with one writev from a buffer all connections share.
// redis-benchmark spends about 120 ms of its one thread per 32 MiB reply;
// this client spends a copy out of the kernel.
//
// With -cluster it reads the slot table (CLUSTER SHARDS) from -addr and
// sends each key to the node that serves its slot, following -MOVED
// answers (each refreshes that slot and is counted); a Redis Cluster and a
// kvring cluster started with --resp-cluster are both driven this way.
//
// It prints one line per test in redis-benchmark's -q shape, "SET: N
// requests per second", followed by bytes/s, p50 and p99, its own CPU time
// per request (user and system: how close it is to being the bottleneck),
// and the GETs that found a value. A GET whose value has another length than -d, and any
// error answer but -MOVED, print "error" and make it exit 1.
//
//	go run ./loadtest/respbench -addr 127.0.0.1:6379 -c 16 -n 2000 -d 4194304 -r 64 -t set,get
//
// loadtest/resp-compare.sh runs it with CLIENT=respbench.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// options are the command's flags.
type options struct {
	addr       string
	clients    int
	requests   int
	size       int
	keys       int
	tests      string
	cluster    bool
	timeout    time.Duration
	reqTimeout time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:6379", "the server (with -cluster: any node of the cluster)")
	flag.IntVar(&o.clients, "c", 16, "connections, each with one request in flight")
	flag.IntVar(&o.requests, "n", 10000, "requests per test, over all connections")
	flag.IntVar(&o.size, "d", 3, "bytes of each SET's value")
	flag.IntVar(&o.keys, "r", 10000, "keys drawn from (key:000000000000 to key:r-1), uniformly")
	flag.StringVar(&o.tests, "t", "set,get", "tests in order, comma separated: set, get")
	flag.BoolVar(&o.cluster, "cluster", false, "route each key by CLUSTER SHARDS and follow -MOVED")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	flag.DurationVar(&o.reqTimeout, "request-timeout", time.Minute, "bound on one request's round trip")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "respbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.clients < 1 || o.requests < 1 || o.size < 0 || o.keys < 1 {
		return fmt.Errorf("-c, -n and -r must be at least 1, -d at least 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	rt, err := newRouter(ctx, o.addr, o.cluster)
	if err != nil {
		return err
	}
	failed := false
	for _, t := range strings.Split(o.tests, ",") {
		op, err := parseTest(t)
		if err != nil {
			return err
		}
		res, err := runTest(ctx, rt, o, op)
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		fmt.Println(res.line(o.size))
		failed = failed || res.errors > 0
	}
	if failed {
		return fmt.Errorf("some requests were answered with an error")
	}
	return nil
}

// Command existslease measures how often a GET that follows an EXISTS = 1
// returns nil under eviction pressure: LMCache's read pattern against a
// Redis-protocol server whose memory is much smaller than the working set.
//
// Writers write a working set of chunks once, each as LMCache does: SET
// <k>kv_bytes (the value), then SET <k>metadata (28 bytes), with no hash
// tag. Meanwhile readers pick chunks written lately (among the last
// -window, where the server evicts), ask EXISTS <k>metadata and, when it is
// 1, wait -gap (a moment, well inside kvring's --resp-exists-lease) and GET
// <k>kv_bytes and <k>metadata. A nil there is what LMCache must not see:
// it found the chunk and cannot read it. The run ends when the working set
// is written; it prints one line of counts.
//
//	go run ./loadtest/existslease -addrs 127.0.0.1:9603,... -cluster -working-set 960MiB -window 192
//
// loadtest/existslease.sh starts the servers (a kvring cluster with the
// lease on and off, and a redis-server as the peer) and runs it against
// each; docs/benchmarks.md has its figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// options are the command's flags.
type options struct {
	addrs      string
	cluster    bool
	label      string
	size       int
	workingSet int64
	window     int
	writers    int
	readers    int
	gap        time.Duration
	admins     string
	maxTime    time.Duration
	rate       float64
}

func main() {
	var o options
	flag.StringVar(&o.addrs, "addrs", "127.0.0.1:9603", "server addresses, comma-separated")
	flag.BoolVar(&o.cluster, "cluster", false, "use a Redis Cluster client (for kvring --resp-cluster or a Redis Cluster)")
	flag.StringVar(&o.label, "label", "", "a name for the run, printed first on its line")
	flag.IntVar(&o.size, "size", 256<<10, "bytes of each chunk's kv_bytes")
	flag.Int64Var(&o.workingSet, "working-set", 960<<20, "bytes of kv_bytes the writers write (each chunk once)")
	flag.IntVar(&o.window, "window", 192, "readers pick among the chunks written last, this many (about what the servers hold)")
	flag.IntVar(&o.writers, "writers", 4, "writer connections")
	flag.IntVar(&o.readers, "readers", 4, "reader connections")
	flag.DurationVar(&o.gap, "gap", 20*time.Millisecond, "how long a reader waits between EXISTS = 1 and its GETs")
	flag.StringVar(&o.admins, "admin", "", "kvring admin addresses, comma-separated: report their evictions and peak pinned bytes")
	flag.Float64Var(&o.rate, "rate", 0, "chunks the writers write per second together (0: as fast as they can): the same churn for every server")
	flag.DurationVar(&o.maxTime, "max-time", 10*time.Minute, "stop the writers after this long, written or not")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "existslease:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.size < 16 || o.workingSet < int64(o.size) || o.window < 1 || o.writers < 1 || o.readers < 0 {
		return fmt.Errorf("bad flags: -size %d, -working-set %d, -window %d, -writers %d, -readers %d", o.size, o.workingSet,
			o.window, o.writers, o.readers)
	}
	addrs := strings.Split(o.addrs, ",")
	var c redis.UniversalClient
	if o.cluster {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8, ReadTimeout: 30 * time.Second,
			PoolSize: o.writers + o.readers})
	} else {
		c = redis.NewClient(&redis.Options{Addr: addrs[0], ReadTimeout: 30 * time.Second, PoolSize: o.writers + o.readers})
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), o.maxTime+time.Minute)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach %s: %w", o.addrs, err)
	}
	var admins []string
	if o.admins != "" {
		admins = strings.Split(o.admins, ",")
	}
	before := scrapeAll(admins)
	l := newLoad(o, c)
	start := time.Now()
	peak := l.run(ctx, admins)
	after := scrapeAll(admins)
	after.evictions -= before.evictions
	after.unpinned -= before.unpinned
	fmt.Println(l.report(o, time.Since(start), after, peak))
	return nil
}

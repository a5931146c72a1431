// Command existslat measures the latency of EXISTS on kvring's Redis port
// for a key another node owns, against redis-server's EXISTS: LMCache's
// lookup walk (EXISTS <k>metadata, chunk by chunk) through one node of a
// cluster when the chunk lives elsewhere.
//
// It SETs LMCache-style chunks (<k>kv_bytes of -value-size bytes, then
// <k>metadata, 28 bytes) through the node at -addr,
// asks that node's admin API where each lives (GET /v1/resp/locate) and
// keeps -keys keys the node neither owns nor holds, and -keys it holds (the
// local case, for reference); the same keys are SET on the redis-server at
// -peer. Then, -reps times, alternating, one connection sends -n EXISTS <k>metadata one
// after another (each waits for its answer) over the remote keys to kvring,
// over the same keys to redis-server, and over the local keys to kvring,
// and it prints p50 and p99 of each run, their medians over the rounds and
// the ratios kvring / redis-server. Every EXISTS must answer 1: the keys
// were acknowledged; it exits 1 after the table if one did not.
//
//	go run ./loadtest/existslat -addr 127.0.0.1:9603 -admin 127.0.0.1:9602 -peer 127.0.0.1:6379
//
// loadtest/existslat.sh starts three kvring nodes (no --resp-cluster) and a
// redis-server and runs it; docs/benchmarks.md has its figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// options are the command's flags.
type options struct {
	addr, admin, peer string
	keys, n, reps     int
	valueSize         int
	maxCandidates     int
	timeout           time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:9603", "the kvring node the client talks to (its Redis port)")
	flag.StringVar(&o.admin, "admin", "127.0.0.1:9602", "that node's admin address (GET /v1/resp/locate)")
	flag.StringVar(&o.peer, "peer", "127.0.0.1:6379", "the redis-server to compare with")
	flag.IntVar(&o.keys, "keys", 64, "keys of each kind (owned elsewhere, held by the node) the EXISTS cycle over")
	flag.IntVar(&o.valueSize, "value-size", 256<<10, "bytes of each chunk's kv_bytes (EXISTS <k>metadata is 1 only while they are held)")
	flag.IntVar(&o.n, "n", 20000, "EXISTS per run (sequential)")
	flag.IntVar(&o.reps, "reps", 3, "rounds, each running kvring (remote keys), redis-server and kvring (local keys) in turn")
	flag.IntVar(&o.maxCandidates, "max-candidates", 4096, "most keys written while looking for -keys of each kind")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on the whole run")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "existslat:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.keys < 1 || o.n < 1 || o.reps < 1 {
		return fmt.Errorf("-keys, -n and -reps must be at least 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	kv := redis.NewClient(&redis.Options{Addr: o.addr, PoolSize: 1, MaxRetries: -1})
	defer kv.Close()
	rd := redis.NewClient(&redis.Options{Addr: o.peer, PoolSize: 1, MaxRetries: -1})
	defer rd.Close()
	remote, local, err := pickKeys(ctx, kv, o)
	if err != nil {
		return err
	}
	for _, k := range remote {
		if err := setChunk(ctx, rd, strings.TrimSuffix(k, "metadata"), o.valueSize); err != nil {
			return fmt.Errorf("redis-server: %w", err)
		}
	}
	fmt.Printf("# EXISTS, one connection, %d sequential per run over %d keys; %d rounds\n", o.n, o.keys, o.reps)
	fmt.Printf("# kvring-remote: keys node %s neither owns nor holds; kvring-local: keys it holds\n", o.addr)
	runs := []target{{"kvring-remote", kv, remote}, {"redis", rd, remote}, {"kvring-local", kv, local}}
	res := make(map[string][]result, len(runs))
	misses := 0
	for rep := range o.reps {
		for _, t := range runs {
			r, err := measure(ctx, t, o.n)
			if err != nil {
				return err
			}
			misses += r.misses
			res[t.name] = append(res[t.name], r)
			fmt.Printf("round %d %-14s p50 %8s p99 %8s  answered 0: %d%s\n", rep+1, t.name, r.p50.Round(time.Microsecond),
				r.p99.Round(time.Microsecond), r.misses, stillRemote(ctx, o.admin, t))
		}
	}
	summarize(runs, res)
	if misses > 0 {
		return fmt.Errorf("FAIL: %d EXISTS answered 0 for keys whose SET was acknowledged", misses)
	}
	return nil
}

// stillRemote says, after a run over the remote keys, whether the node now
// holds some (a hot group's copies spread to it would make later runs local
// ones); empty for the other targets.
func stillRemote(ctx context.Context, admin string, t target) string {
	if t.name != "kvring-remote" {
		return ""
	}
	loc, err := locate(ctx, admin, t.keys)
	if err != nil {
		return fmt.Sprintf("  (cannot locate them again: %v)", err)
	}
	held := 0
	for _, k := range loc.Keys {
		if slices.Contains(k.Holders, loc.Node) {
			held++
		}
	}
	if held > 0 {
		return fmt.Sprintf("  WARNING: the node now holds %d of these %d keys (a hot group spread to it? "+
			"kvring serve --spread-threshold -1 keeps them remote): later runs are partly local", held, len(loc.Keys))
	}
	return fmt.Sprintf("  (still remote: %d keys)", len(loc.Keys))
}

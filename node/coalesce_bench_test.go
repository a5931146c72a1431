package node

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
)

// BenchmarkConcurrentLookups measures what concurrent lookups cost when
// they ask the same owners, with Config.CoalescePeerHas off (the default)
// and on, two clusters alternating in one run: each a 3-node cluster in
// process, one SDK client of
// node 0 (the coordinator), and loops (1, 4, 8, 16) each looking up its own 32
// held chunks (8 KiB, replication 2, so node 0 asks both peers about their
// share) over and over. Besides ns/op (per lookup) and the latency median
// and 99th percentile, it reports has-calls/op: the Has calls node 0's
// peers served per lookup (their kvring_peer_request_duration_seconds
// {op="has"} count), about 2 when every lookup sends its own and less when
// concurrent ones share calls, and cpu-us/op: the CPU time (user and
// system) of the whole process (client and the three nodes) per lookup,
// which other load on the machine does not inflate as it does ns/op.
//
//	go test -run '^$' -bench ConcurrentLookups -benchtime 20000x -count 5 ./node/
func BenchmarkConcurrentLookups(b *testing.B) {
	const loops, perLookup = 16, 32
	type cluster struct {
		tc   *testCluster
		sdk  *client.Client
		sets [][]client.ChunkID
	}
	start := func(coalesce bool) cluster {
		tc := newTestClusterWith(b, 3, 256<<20, func(_ int, cfg *Config) { cfg.CoalescePeerHas = coalesce })
		c := cluster{tc: tc, sdk: testClient(b, tc.nodes[0].addr, 2, 1), sets: make([][]client.ChunkID, loops)}
		for w := range c.sets {
			var chunks []client.Chunk
			for i := range perLookup {
				chunks = append(chunks, chunkOf(uint64(w*1000+i), 8<<10))
			}
			if _, err := c.sdk.Put(context.Background(), chunks); err != nil {
				b.Fatal(err)
			}
			for _, ch := range chunks {
				c.sets[w] = append(c.sets[w], ch.ID)
			}
		}
		return c
	}
	clusters := map[string]cluster{"coalesce=off": start(false), "coalesce=on": start(true)}
	for _, n := range []int{1, 4, 8, 16} {
		for _, mode := range []string{"coalesce=off", "coalesce=on"} { // the two clusters alternate in one run
			c := clusters[mode]
			b.Run("loops"+strconv.Itoa(n)+"/"+mode, func(b *testing.B) {
				next := make(chan int, n)
				for w := range n {
					next <- w
				}
				before, cpu := peerHasCalls(b, c.tc), processCPU(b)
				timeCalls(b, n, lookupLoop(c.sdk, c.sets, next))
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
				b.ReportMetric(float64(peerHasCalls(b, c.tc)-before)/float64(b.N), "has-calls/op")
			})
		}
	}
}

// lookupLoop returns a call for timeCalls: each caller takes its own set of
// ids from next on its first call and looks them up, all held.
func lookupLoop(sdk *client.Client, sets [][]client.ChunkID, next chan int) func() error {
	return func() error {
		w := <-next
		defer func() { next <- w }()
		res, err := sdk.Lookup(context.Background(), sets[w], 0)
		if err == nil && res.Held != len(sets[w]) {
			err = fmt.Errorf("lookup: %d of %d held", res.Held, len(sets[w]))
		}
		return err
	}
}

// peerHasCalls sums the Has calls the cluster's nodes served as owners.
func peerHasCalls(b *testing.B, tc *testCluster) uint64 {
	b.Helper()
	var n uint64
	for _, nd := range tc.nodes {
		mfs, err := nd.reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "kvring_peer_request_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" && l.GetValue() == "has" {
						n += m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
	}
	return n
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package node

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/store/disk"
)

// BenchmarkDRAMPathWithDiskTier: what the disk tier costs the calls that
// shared memory answers. Two nodes in this process, 32 MiB of shared memory
// each, one with a disk tier and one without, both filled so that every put
// evicts a chunk (which the node with the tier offloads: copied into its
// write queue and written to disk). Each round puts one new 256 KiB chunk
// and gets one of 8 hot chunks (held in shared memory: read every 8
// rounds, they stay the most recently used), on one node and then the
// other, alternating which goes first, so both see the same noise. Reports
// p50 and p99 of each and the ratios tier on / tier off.
//
//	go test -run '^$' -bench DRAMPathWithDiskTier -benchtime 3000x ./node/
func BenchmarkDRAMPathWithDiskTier(b *testing.B) {
	const size, hot = 256 << 10, 8
	_, off := costNode(b, "")
	onNode, on := costNode(b, b.TempDir())
	var lat [2][2][]time.Duration // [tier off, on][put, get]
	sdks := [2]*client.Client{off, on}
	hotIDs := [2][]client.ChunkID{}
	next := [2]uint64{}
	for i, c := range sdks {
		hotIDs[i] = heldChunks(b, c, hot, size)
		next[i] = hot + 1
		for j := range (48 << 20) / size { // fill the 32 MiB and then some: puts evict
			costPut(b, c, &next[i], size)
			costGet(b, c, hotIDs[i][j%hot], size) // the hot chunks stay the most recently used
		}
	}
	b.ResetTimer()
	for r := 0; b.Loop(); r++ {
		for k := range 2 {
			i := (r + k) % 2
			t := time.Now()
			costPut(b, sdks[i], &next[i], size)
			lat[i][0] = append(lat[i][0], time.Since(t))
			t = time.Now()
			costGet(b, sdks[i], hotIDs[i][r%hot], size)
			lat[i][1] = append(lat[i][1], time.Since(t))
		}
	}
	b.StopTimer()
	if st := onNode.Store().Stats(); st.LowerHits != 0 {
		b.Fatalf("%d gets were read from disk: the hot chunks left shared memory", st.LowerHits)
	}
	if n := onNode.parts.Load().disk.Stats().Offloads; n < uint64(b.N)/2 {
		b.Fatalf("%d offloads in %d rounds: the tier was not offloading", n, b.N)
	}
	for op, name := range []string{"put", "get"} {
		p50off, p99off := quantile(lat[0][op], 0.5), quantile(lat[0][op], 0.99)
		p50on, p99on := quantile(lat[1][op], 0.5), quantile(lat[1][op], 0.99)
		b.ReportMetric(float64(p50off.Microseconds()), name+"_p50_off_us")
		b.ReportMetric(float64(p50on.Microseconds()), name+"_p50_on_us")
		b.ReportMetric(float64(p99off.Microseconds()), name+"_p99_off_us")
		b.ReportMetric(float64(p99on.Microseconds()), name+"_p99_on_us")
		b.ReportMetric(float64(p50on)/float64(p50off), name+"_p50_on/off")
		b.ReportMetric(float64(p99on)/float64(p99off), name+"_p99_on/off")
	}
}

// costNode starts a node of 32 MiB of shared memory, with a disk tier in
// diskDir when it is not empty, and returns an SDK connected to it.
func costNode(b *testing.B, diskDir string) (*Node, *client.Client) {
	n, _ := startBenchNode(b, 32<<20, func(c *Config) {
		c.Socket.Path = ""
		if diskDir != "" {
			c.Disk = disk.Config{Dir: diskDir, Limit: 1 << 30, RegionSize: 16 << 20}
		}
	})
	return n, benchSDK(b, n)
}

// costPut puts one new chunk of size bytes (id *next, then increments it).
func costPut(b *testing.B, c *client.Client, next *uint64, size int) {
	var ch client.Chunk
	binary.LittleEndian.PutUint64(ch.ID[:], *next)
	ch.Data = make([]byte, size)
	binary.LittleEndian.PutUint64(ch.Data, *next)
	*next++
	res, err := c.Put(context.Background(), []client.Chunk{ch})
	if err != nil {
		b.Fatal(err)
	}
	if res[0].Status != client.Stored {
		b.Fatalf("put %s: %s (%s)", ch.ID, res[0].Status, res[0].Reason)
	}
}

// costGet gets one chunk that must be found.
func costGet(b *testing.B, c *client.Client, id client.ChunkID, size int) {
	res, err := c.Get(context.Background(), []client.ChunkID{id})
	if err != nil {
		b.Fatal(err)
	}
	if r := res[0]; !r.Found || len(r.Data) != size {
		b.Fatalf("get %s: found %v, %d bytes (%s)", r.ID, r.Found, len(r.Data), r.Reason)
	}
}

// quantile returns the q-quantile of d (sorted in place).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

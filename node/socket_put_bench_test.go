package node

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
)

// BenchmarkSocketPutVsGRPC puts chunks into one node (R=1, 128 MiB, LRU)
// several ways in the same run, in turn, and reports each way's MB/s and
// its speed-up over the gRPC SDK's put to the same node (X/grpc):
//
//   - copy2json: create a blob, copy() the chunk into the mapping, then
//     seal, publish (this node the owner: the blob's slot becomes the
//     chunk) and delete it in one request: two JSON requests (the way this
//     benchmark measured before the binary framing);
//   - copy2: the same in the binary framing;
//   - copy1: the chunk copied into a blob the previous publish created
//     (SealPublishAndCreate): one request per chunk;
//   - grpc: client.Put.
//
// The node's budget is cycled through every way before the timer starts.
//
//	go test -run '^$' -bench SocketPutVsGRPC -benchtime 300x -count 3 ./node/
func BenchmarkSocketPutVsGRPC(b *testing.B) {
	for _, size := range []int{2 << 20, 256 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			r := newPutRig(b, 128<<20)
			runPutPaths(b, size, 1, []putPath{{"copy2json", r.withJSON(b), sockPutCopy}, {"copy2", r, sockPutCopy},
				{"copy1", r, sockPutNext}, {"grpc", r, grpcPut}})
		})
	}
}

// BenchmarkSocketPutChecksumParts is the A/B of store.Config.ChecksumParts:
// two nodes in one process, one checksumming a blob in one pass (the
// default) and one in two parts at once, each put to in turn through the
// socket (two requests) and through the gRPC SDK (grpc, grpc2: both nodes
// take the same load); the ratios are to the first node's gRPC puts.
//
//	go test -run '^$' -bench SocketPutChecksumParts -benchtime 300x -count 3 ./node/
//
// BenchmarkSocketPutSmall puts batches of 360 chunks of 1 KiB (as the
// built-in trace does with 1 KiB chunks) into one node (32 MiB), through
// the socket (one create and one publish per batch, and the one-request
// form; each in JSON and in the binary framing) and the gRPC SDK, in turn.
//
//	go test -run '^$' -bench SocketPutSmall -benchtime 100x -count 3 ./node/
func BenchmarkSocketPutSmall(b *testing.B) {
	r := newPutRig(b, 32<<20)
	runPutPaths(b, 1<<10, 360, []putPath{{"copy2json", r.withJSON(b), sockPutCopy}, {"copy2", r, sockPutCopy},
		{"copy1json", r.withJSON(b), sockPutNext}, {"copy1", r, sockPutNext}, {"grpc", r, grpcPut}})
}

func BenchmarkSocketPutChecksumParts(b *testing.B) {
	for _, size := range []int{2 << 20, 256 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			one := newPutRig(b, 128<<20, func(c *Config) { c.Store.ChecksumParts = 1 })
			two := newPutRig(b, 128<<20, func(c *Config) { c.Store.ChecksumParts = 2 })
			runPutPaths(b, size, 1, []putPath{{"parts1", one, sockPutCopy}, {"parts2", two, sockPutCopy},
				{"grpc", one, grpcPut}, {"grpc2", two, grpcPut}})
		})
	}
}

// putRig is one node with a gRPC SDK client and a local socket client, for
// the put benchmarks.
type putRig struct {
	n    *Node
	cfg  Config
	sdk  *client.Client
	sock *local.Client
	ns   local.Namespace
	next []*local.Blob // the blobs sockPutNext writes next (made by the previous publish)
}

// newPutRig starts a node whose store has limit bytes.
func newPutRig(b *testing.B, limit int64, mod ...func(*Config)) *putRig {
	n, cfg := startBenchNode(b, limit, mod...)
	sdk, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "bench/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sdk.Close() })
	testutil.Eventually(b, "the SDK to connect", 10*time.Second, func() bool { return sdk.State().Status == client.ConnConnected })
	sock, err := local.Dial(b.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	ns, err := sock.RegisterNamespace("bench/model", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	return &putRig{n: n, cfg: cfg, sdk: sdk, sock: sock, ns: ns}
}

// withJSON returns the rig with a socket client of its own that speaks
// only JSON.
func (r *putRig) withJSON(b *testing.B) *putRig {
	sock, err := local.Dial(b.Context(), local.Config{Path: r.cfg.Socket.Path, JSON: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	return &putRig{n: r.n, cfg: r.cfg, sdk: r.sdk, sock: sock, ns: r.ns}
}

// putPath is one way of putting a batch of chunks into a rig's node.
type putPath struct {
	name string
	rig  *putRig
	put  func(b *testing.B, r *putRig, ids [][32]byte, srcs [][]byte)
}

func sockPutCopy(b *testing.B, r *putRig, ids [][32]byte, srcs [][]byte) {
	blobs := sockCreate(b, r, srcs)
	for i, blob := range blobs {
		copy(blob.Data, srcs[i])
	}
	sockPublish(b, r, ids, blobs)
}

// sockCreate creates one blob per src, in one request.
func sockCreate(b *testing.B, r *putRig, srcs [][]byte) []*local.Blob {
	if len(srcs) == 1 {
		blob, err := r.sock.CreateBlob(int64(len(srcs[0])))
		if err != nil {
			b.Fatal(err)
		}
		return []*local.Blob{blob}
	}
	blobs, err := r.sock.CreateBlobs(blobSizes(srcs))
	if err != nil {
		b.Fatal(err)
	}
	return blobs
}

func blobSizes(srcs [][]byte) []int64 {
	sizes := make([]int64, len(srcs))
	for i, s := range srcs {
		sizes[i] = int64(len(s))
	}
	return sizes
}

func blobIDs(blobs []*local.Blob) []uint64 {
	ids := make([]uint64, len(blobs))
	for i, b := range blobs {
		ids[i] = b.ID
	}
	return ids
}

func sockPublish(b *testing.B, r *putRig, ids [][32]byte, blobs []*local.Blob) {
	res, err := r.sock.SealPublishAndDelete(r.ns, ids, blobIDs(blobs), nil)
	checkStored(b, "socket publish", res, err, len(ids))
}

func checkStored(b *testing.B, what string, res []local.PublishResult, err error, n int) {
	if err != nil || len(res) != n {
		b.Fatalf("%s: %d results for %d chunks, %v", what, len(res), n, err)
	}
	for _, r := range res {
		if r.Status != "stored" {
			b.Fatalf("%s: %+v", what, r)
		}
	}
}

// sockPutNext writes the blobs the previous publish created (the first
// call creates them) and publishes them, creating the next batch's in the
// same request. The batches are the same size every time.
func sockPutNext(b *testing.B, r *putRig, ids [][32]byte, srcs [][]byte) {
	if len(r.next) != len(srcs) || len(r.next[0].Data) != len(srcs[0]) {
		r.next = sockCreate(b, r, srcs)
	}
	for i, blob := range r.next {
		copy(blob.Data, srcs[i])
	}
	res, next, err := r.sock.SealPublishAndCreate(r.ns, ids, blobIDs(r.next), nil, blobSizes(srcs))
	checkStored(b, "socket publish and create", res, err, len(ids))
	if len(next) != len(srcs) {
		b.Fatalf("socket publish and create: %d blobs for %d chunks", len(next), len(srcs))
	}
	r.next = next
}

func grpcPut(b *testing.B, r *putRig, ids [][32]byte, srcs [][]byte) {
	chunks := make([]client.Chunk, len(ids))
	for i := range ids {
		chunks[i] = client.Chunk{ID: client.ChunkID(ids[i]), Data: srcs[i]}
	}
	out, err := r.sdk.Put(b.Context(), chunks)
	if err != nil || len(out) != len(ids) {
		b.Fatalf("gRPC put: %d results, %v", len(out), err)
	}
	for _, o := range out {
		if o.Status != client.Stored {
			b.Fatalf("gRPC put: %+v", o)
		}
	}
}

// runPutPaths puts one batch of batch chunks of size bytes each way per
// iteration (in a random order each time), each chunk with bytes and an id
// of its own, after cycling every rig's budget through every way once (so
// that the measured puts reuse slots whose pages exist, as on a node that
// has been running, instead of paying for fresh pages, which no way does
// in a steady state). It reports each way's MB/s and, for each way but
// "grpc", its ratio to the first "grpc" way (of the total times, and of
// the median times per put: -p50), and logs each way's mean time per
// batch, also split by whether a gRPC put ran just before.
func runPutPaths(b *testing.B, size, batch int, paths []putPath) {
	srcs := make([][]byte, batch)
	for k := range srcs {
		srcs[k] = make([]byte, size)
		for i := range srcs[k] {
			srcs[k][i] = byte(i*131 + 17 + k)
		}
	}
	ids := make([][32]byte, batch)
	rng := rand.New(rand.NewPCG(14, 14))
	order := make([]int, len(paths))
	// Each way's time and count split by whether the put before it was a
	// gRPC put ([1]) or not ([0]): a put right after a gRPC put pays for
	// some of its garbage and its cache footprint (the earlier form of this
	// benchmark always ran the socket put there).
	var split [2][]time.Duration
	var splitN [2][]int
	split[0], split[1] = make([]time.Duration, len(paths)), make([]time.Duration, len(paths))
	splitN[0], splitN[1] = make([]int, len(paths)), make([]int, len(paths))
	prevGRPC := 0
	took := make([]time.Duration, len(paths))
	each := make([][]time.Duration, len(paths)) // every measured put, for the medians
	round := func(i int) {
		// Each round takes the ways in a new random order, so that no way
		// always follows the same other one (and finds the caches and the
		// collector as that one left them).
		for k := range order {
			order[k] = k
		}
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, k := range order {
			p := paths[k]
			for c := range srcs { // distinct bytes and ids per chunk
				binary.LittleEndian.PutUint64(srcs[c], uint64(i))
				binary.LittleEndian.PutUint64(srcs[c][8:], uint64(k<<32|c))
				ids[c] = sha256.Sum256(srcs[c][:16])
			}
			t0 := time.Now()
			p.put(b, p.rig, ids, srcs)
			d := time.Since(t0)
			took[k] += d
			each[k] = append(each[k], d)
			split[prevGRPC][k] += d
			splitN[prevGRPC][k]++
			prevGRPC = 0
			if strings.HasPrefix(p.name, "grpc") {
				prevGRPC = 1
			}
		}
	}
	for i := range max(1, int(paths[0].rig.cfg.Store.MemoryLimit)/(size*batch)) {
		round(-1 - i)
	}
	clear(took)
	for k := range each {
		each[k] = each[k][:0]
	}
	for w := range split {
		clear(split[w])
		clear(splitN[w])
	}
	b.SetBytes(int64(len(paths) * size * batch))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(i)
	}
	b.StopTimer()
	mb := float64(size*batch) * float64(b.N) / 1e6
	grpc := -1
	for k, p := range paths {
		b.ReportMetric(mb/took[k].Seconds(), p.name+"-MB/s")
		if p.name == "grpc" && grpc < 0 {
			grpc = k
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	for k, p := range paths {
		if grpc >= 0 && p.name != "grpc" {
			b.ReportMetric(took[grpc].Seconds()/took[k].Seconds(), p.name+"/grpc")
			// The ratio of the medians: the same speed-up, less swayed by
			// the odd put another tenant of the host delays by milliseconds.
			b.ReportMetric(median(each[grpc]).Seconds()/median(each[k]).Seconds(), p.name+"/grpc-p50")
		}
	}
	mean := func(d time.Duration, n int) time.Duration {
		return (d / time.Duration(max(n, 1))).Round(time.Microsecond)
	}
	var per, after []string
	for k, p := range paths {
		per = append(per, fmt.Sprintf("%s %v", p.name, mean(took[k], b.N)))
		after = append(after, fmt.Sprintf("%s %v / %v", p.name, mean(split[1][k], splitN[1][k]), mean(split[0][k], splitN[0][k])))
	}
	b.Logf("mean per put: %v", per)
	b.Logf("mean per put after a gRPC put / after another: %v", after)
}

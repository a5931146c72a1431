package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/loadtest"
)

// usedBytes scrapes the node's kvring_store_used_bytes metric.
func (n *e2eNode) usedBytes(t *testing.T) int64 {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "kvring_store_used_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int64(f)
		}
	}
	t.Fatalf("node %s: no kvring_store_used_bytes in /metrics", n.id)
	return 0
}

// socketEngine dials a node's local socket.
func socketEngine(t *testing.T, path string) *local.Client {
	t.Helper()
	c, err := local.Dial(t.Context(), local.Config{Path: path, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// socketChunk writes chunk n (e2eChunk's bytes) into a new sealed blob.
func socketChunk(t *testing.T, c *local.Client, n uint64, size int) (id [32]byte, blob uint64, data []byte) {
	t.Helper()
	ch := e2eChunk(n, size)
	b, err := c.CreateBlob(int64(size))
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Data, ch.Data)
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	return ch.ID, b.ID, ch.Data
}

// TestSocketEnginesShareChunksAcrossTheCluster: an engine on node 1's
// socket publishes chunks to a three-node cluster with replication 2 (and
// min replicas 2); each publish grows the used bytes of every holder (node
// 1's already at the blob's creation, the peers' at the publish); an
// engine on node 3's socket reads them byte-exact through its mappings.
// With both holders of a chunk killed, the publish of a new chunk fails
// with the reason and a lookup counts nothing. After node 3 is killed its
// engine's next call fails at once; after its restart the same client
// succeeds again.
func TestSocketEnginesShareChunksAcrossTheCluster(t *testing.T) {
	t.Parallel()
	dir := testutil.SocketDir(t)
	sock := func(i int) string { return filepath.Join(dir, fmt.Sprintf("n%d.sock", i)) }
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--socket", sock(1))
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--socket", sock(2), "--join", n1.gossip)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--socket", sock(3), "--join", n1.gossip)
	nodes := map[string]*e2eNode{n1.id: n1, n2.id: n2, n3.id: n3}
	testutil.Eventually(t, "every node to see three active members", 30*time.Second, func() bool {
		return seesRing(n1, n1.id, n2.id, n3.id) && seesRing(n2, n1.id, n2.id, n3.id) && seesRing(n3, n1.id, n2.id, n3.id)
	})
	e1, e3 := socketEngine(t, sock(1)), socketEngine(t, sock(3))
	schema := local.Schema{Model: "llama-8b", Dtype: "bf16", TokensPerChunk: 16}
	ns, err := e1.RegisterNamespace("e2e/socket", schema, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	ns3, err := e3.RegisterNamespace("e2e/socket", schema, 2, 2)
	if err != nil || !bytes.Equal(ns3.Fingerprint, ns.Fingerprint) {
		t.Fatalf("register on node 3: %+v %v", ns3, err)
	}

	// Publish until some chunk lives on nodes 2 and 3 only (and some on
	// node 1, whose blob slot becomes the chunk).
	const size = 300 << 10
	type published struct {
		id      [32]byte
		data    []byte
		holders []string
	}
	var chunks []published
	var away *published // a chunk node 1 does not hold
	for i := uint64(0); i < 40 && (away == nil || len(chunks) < 6); i++ {
		used := map[string]int64{}
		for id, n := range nodes {
			used[id] = n.usedBytes(t)
		}
		id, blob, data := socketChunk(t, e1, 5000+i, size)
		if got := n1.usedBytes(t); got < used[n1.id]+size {
			t.Fatalf("node 1's used bytes %d after a %d-byte blob, %d before", got, size, used[n1.id])
		}
		res, err := e1.Publish(ns, [][32]byte{id}, []uint64{blob}, nil)
		if err != nil || len(res) != 1 || res[0].Status != "stored" || len(res[0].Holders) != 2 {
			t.Fatalf("publish %d: %+v %v", i, res, err)
		}
		p := published{id: id, data: data}
		for _, h := range res[0].Holders {
			p.holders = append(p.holders, h.NodeID)
			if h.NodeID == n1.id {
				continue // its used bytes grew with the blob
			}
			if got := nodes[h.NodeID].usedBytes(t); got < used[h.NodeID]+size {
				t.Fatalf("holder %s's used bytes %d after publish %d, %d before", h.NodeID, got, i, used[h.NodeID])
			}
		}
		if err := e1.Release(blob); err != nil {
			t.Fatal(err)
		}
		if err := e1.Delete(blob); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, p)
		if away == nil && !slices.Contains(p.holders, n1.id) {
			away = &chunks[len(chunks)-1]
		}
	}
	if away == nil {
		t.Fatal("no chunk landed on nodes 2 and 3 only; the test proves nothing")
	}
	awayID := away.id

	// Node 3's engine reads every chunk through its own mappings.
	for i, p := range chunks {
		got, err := e3.GetChunks(ns3, [][32]byte{p.id}, nil)
		if err != nil || len(got) != 1 || !got[0].Found || !bytes.Equal(got[0].Blob.Data, p.data) {
			t.Fatalf("chunk %d (holders %v) read through node 3's socket: %+v %v", i, p.holders, got, err)
		}
		if err := e3.Release(got[0].BlobID); err != nil {
			t.Fatal(err)
		}
	}

	// Both holders of the away chunk die: nothing can hold two replicas.
	n2.kill(t)
	n3.kill(t)
	start := time.Now()
	if _, err := e3.InstanceStatus(); err == nil {
		t.Fatal("a call on node 3's socket succeeded after node 3 was killed")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the call on the killed node's socket took %v", d)
	}
	id, blob, _ := socketChunk(t, e1, 9999, size)
	res, err := e1.Publish(ns, [][32]byte{id}, []uint64{blob}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status == "stored" || res[0].Status == "already_held" || res[0].Reason == "" {
		t.Fatalf("publish with two of three nodes dead and min replicas 2: %+v, want failed with the reason", res[0])
	}
	t.Logf("publish with both holders dead: %s: %s", res[0].Status, res[0].Reason)
	lr, err := e1.Lookup(ns, [][32]byte{awayID}, nil, 0)
	if err != nil || lr.Held != 0 {
		t.Fatalf("lookup of a chunk whose holders are dead: %+v %v, want 0 held", lr, err)
	}

	// Node 3 comes back: the same client's next call succeeds.
	restartNode(t, n3, "--socket", sock(3))
	testutil.Eventually(t, "node 3's engine to be served again", 30*time.Second, func() bool {
		_, err := e3.InstanceStatus()
		return err == nil
	})
	got, err := e3.GetChunks(ns3, [][32]byte{awayID}, nil)
	if err != nil || !got[0].Found || !bytes.Equal(got[0].Blob.Data, away.data) {
		t.Fatalf("the chunk node 3 held before its restart, read through the same client: %+v %v", got, err)
	}
}

// TestBenchReplaysThroughTheSocket: kvring bench --socket replays the trace
// through a node's local socket with verified reads and the report of a
// gRPC replay: the same requests, chunks and ideal hit ratio, no corrupt or
// missing chunk; a second replay finds every chunk.
func TestBenchReplaysThroughTheSocket(t *testing.T) {
	t.Parallel()
	sockPath := filepath.Join(testutil.SocketDir(t), "n.sock")
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--socket", sockPath)
	tracePath := filepath.Join("..", "..", "loadtest", "trace", "testdata", "synthetic_trace.jsonl")
	common := []string{"bench", "--admin", n.admin, "--trace", tracePath, "--max-requests", "20", "--speedup", "-1",
		"--engines", "2", "--json", "--timeout", benchCallTimeout}
	run := func(args ...string) loadtest.Report {
		t.Helper()
		r := mustCLI(t, nil, append(slices.Clone(common), args...)...)
		var rep loadtest.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("bench --json printed no report: %v: %v", err, r)
		}
		if rep.RequestsDone != 20 || rep.Corrupt != 0 || rep.Failed != 0 || rep.MissingAfterAck != 0 || rep.Evictions == nil {
			t.Fatalf("report: %+v", rep)
		}
		return rep
	}
	grpc := run("--addr", n.grpc, "--namespace", "over-grpc")
	sock := run("--socket", sockPath, "--namespace", "over-socket")
	if sock.Backend != "kvring socket "+sockPath || sock.Stored != grpc.Stored || sock.IdealChunkHitRatio != grpc.IdealChunkHitRatio ||
		sock.ChunkHitRatio != grpc.ChunkHitRatio || sock.ChunkHits != grpc.ChunkHits {
		t.Fatalf("socket replay %+v, gRPC replay %+v: want the same outcome", sock, grpc)
	}
	if again := run("--socket", sockPath, "--namespace", "over-socket"); again.ChunkHitRatio != 1 || again.Stored != 0 {
		t.Fatalf("second socket replay: hit ratio %v, stored %d", again.ChunkHitRatio, again.Stored)
	}
	// A socket nobody serves fails, after the connection timeout at worst: the default one.
	r := runCLI(t, nil, append(slices.Clone(common), "--socket", filepath.Join(testutil.SocketDir(t), "none.sock"), "--timeout", "10s")...)
	checkOneLineFailure(t, r, "local socket")
}

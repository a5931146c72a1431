package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvring/kvring/loadtest"
)

// TestAReplayThroughThreeNodesWithDiskTiers: the built-in Mooncake trace
// (its first 200 requests at 512-token chunks of 32 KiB) replayed through
// three nodes, each with 16 MiB of shared memory over a disk tier of its
// own, so that most of what the trace writes is held on disk: no read is
// corrupt, no chunk acknowledged as held is missing later, and gets were
// served from disk. The same replay again finds what the first wrote.
func TestAReplayThroughThreeNodesWithDiskTiers(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 200 requests through three nodes, twice")
	}
	t.Parallel()
	var nodes []*e2eNode
	for i := range 3 {
		args := append(append([]string(nil), noSettle...), diskTierArgs(t.TempDir())...)
		args = append(args, "--memory-limit", "16MiB") // the last --memory-limit counts
		if i > 0 {
			args = append(args, "--join", nodes[0].gossip)
		}
		nodes = append(nodes, startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", args...))
	}
	waitRing(t, nodes...)
	var grpcs, admins []string
	for _, n := range nodes {
		grpcs, admins = append(grpcs, n.grpc), append(admins, n.admin)
	}
	run := func() loadtest.Report {
		t.Helper()
		r := mustCLI(t, nil, "bench", "--addr", strings.Join(grpcs, ","), "--admin", strings.Join(admins, ","),
			"--max-requests", "200", "--speedup", "-1", "--engines", "2", "--chunk-tokens", "512",
			"--bytes-per-token", "64", "--namespace", "e2e/disk-replay", "--timeout", benchCallTimeout, "--json")
		var rep loadtest.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("bench --json printed no report: %v: %v", err, r)
		}
		if rep.RequestsDone != 200 || rep.Corrupt != 0 || rep.Failed != 0 || rep.MissingAfterAck != 0 {
			t.Fatalf("report: %+v", rep)
		}
		return rep
	}
	first := run()
	var onDisk int64
	var diskHits uint64
	for _, n := range nodes {
		st := n.diskStats(t)
		onDisk += st.Disk.Chunks + st.Disk.QueuedChunks
		diskHits += st.Disk.Hits
		if st.Disk.ChecksumErrors != 0 || st.Disk.ReadErrors != 0 {
			t.Fatalf("node %s: disk read errors: %+v", n.id, *st.Disk)
		}
	}
	second := run()
	t.Logf("first: stored %d, hit ratio %.4f (ideal %.4f); second: hit ratio %.4f; %d chunks on disk, %d disk hits",
		first.Stored, first.ChunkHitRatio, first.IdealChunkHitRatio, second.ChunkHitRatio, onDisk, diskHits)
	if onDisk == 0 || diskHits == 0 || second.ChunkHitRatio < first.ChunkHitRatio {
		t.Fatalf("the disk tiers held %d chunks and served %d reads; the second run's hit ratio %.4f",
			onDisk, diskHits, second.ChunkHitRatio)
	}
}

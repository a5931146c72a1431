package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// lmcacheSeqNamespaces are the namespaces testdata/resp_lmcache_sequence.py's
// writers 0, 1 and 2 write to, per docs/resp.md's table: one per model,
// world size, worker id (and dtype, in the current layout), whatever the
// chunk hashes.
var lmcacheSeqNamespaces = []string{
	"resp:Qwen/Qwen2.5-0.5B-Instruct:1:0:bfloat16",
	"resp:meta-llama/Llama-3.1-8B:2:0:bfloat16",
	"resp:meta-llama/Llama-3.1-8B:2:1:bfloat16",
	"resp:vllm:meta-llama/Llama-3.1-8B:1:0",
	"resp:vllm:mistralai/Mistral-7B-Instruct-v0.3:2:0",
	"resp:vllm:mistralai/Mistral-7B-Instruct-v0.3:2:1",
}

// Per writer and key layout the script writes four chunks (three of 3 MiB,
// one of 32 MiB), each a kv_bytes and a metadata key.
const (
	lmcacheSeqChunks     = 4
	lmcacheSeqChunkBytes = 3*3<<20 + 32<<20
	lmcacheSeqLayouts    = 2
)

// lmcacheSeqStats is the JSON line resp_lmcache_sequence.py prints.
type lmcacheSeqStats struct {
	Role            string `json:"role"`
	Writers         []int  `json:"writers"`
	ChunksWritten   int    `json:"chunks_written"`
	BytesWritten    int64  `json:"bytes_written"`
	ChunksFound     int    `json:"chunks_found"`
	ChunksRead      int    `json:"chunks_read"`
	BytesVerified   int64  `json:"bytes_verified"`
	MetadataDeletes int    `json:"metadata_deletes"`
}

// lmcacheSeqRun is one run of the script, started.
type lmcacheSeqRun struct {
	args           []string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

// startLMCacheSeq starts resp_lmcache_sequence.py with args.
func startLMCacheSeq(t *testing.T, args ...string) *lmcacheSeqRun {
	t.Helper()
	r := &lmcacheSeqRun{args: args}
	r.cmd = exec.Command("/usr/bin/python3", append([]string{"testdata/resp_lmcache_sequence.py"}, args...)...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := testutil.Start(r.cmd); err != nil {
		t.Fatalf("resp_lmcache_sequence.py %v: %v", args, err)
	}
	return r
}

// wait waits for the run to end and checks what it reports: every chunk of
// the writers it read found by the EXISTS walk, read and verified, and no
// metadata deleted for bytes that read nil.
func (r *lmcacheSeqRun) wait(t *testing.T) lmcacheSeqStats {
	t.Helper()
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("resp_lmcache_sequence.py %v: %v\n%s%s", r.args, err, r.stdout.String(), r.stderr.String())
	}
	var st lmcacheSeqStats
	if err := json.Unmarshal(r.stdout.Bytes(), &st); err != nil {
		t.Fatalf("resp_lmcache_sequence.py %v printed %q: %v", r.args, r.stdout.String(), err)
	}
	chunks := len(st.Writers) * lmcacheSeqLayouts * lmcacheSeqChunks
	size := int64(len(st.Writers) * lmcacheSeqLayouts * lmcacheSeqChunkBytes)
	if st.ChunksFound != chunks || st.ChunksRead != chunks || st.BytesVerified != size || st.MetadataDeletes != 0 {
		t.Fatalf("resp_lmcache_sequence.py %v: %+v, want %d chunks (%d bytes) found, read and verified, no metadata deleted",
			r.args, st, chunks, size)
	}
	if st.Role == "writer" && (st.ChunksWritten != chunks || st.BytesWritten != size) {
		t.Fatalf("writer %v: %+v, want %d chunks (%d bytes) written", r.args, st, chunks, size)
	}
	return st
}

// runLMCacheSeq runs writers 0, 1 and 2 at once through writeAddr, then
// one reader of all three through each of readAddrs at once.
func runLMCacheSeq(t *testing.T, mode, writeAddr string, readAddrs ...string) {
	t.Helper()
	seed := fmt.Sprintf("%s-%d", t.Name(), rand.Uint64())
	var runs []*lmcacheSeqRun
	for w := range 3 {
		runs = append(runs, startLMCacheSeq(t, "--mode", mode, "--addr", writeAddr, "--seed", seed, "--role", "writer", "--writer", fmt.Sprint(w)))
	}
	for _, r := range runs {
		r.wait(t)
	}
	runs = runs[:0]
	for _, a := range readAddrs {
		runs = append(runs, startLMCacheSeq(t, "--mode", mode, "--addr", a, "--seed", seed, "--role", "reader",
			"--writer", "0", "--writer", "1", "--writer", "2"))
	}
	for _, r := range runs {
		r.wait(t)
	}
}

// checkOneNamespacePerModelAndWorker: `kvring namespaces` lists exactly
// want, each with every chunk its writers stored (a kv_bytes and a metadata
// key per chunk), and no node wrote a key to the default namespace.
func checkOneNamespacePerModelAndWorker(t *testing.T, nodes []*e2eNode, want []string, chunks int64, minBytes int64) {
	t.Helper()
	list, by := namespacesAt(t, nodes[0].admin)
	var got []string
	for _, ns := range list.Namespaces {
		got = append(got, ns.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("kvring namespaces lists\n  %s\nwant one per model, world size, worker (and dtype):\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, name := range want {
		if ns := by[name]; ns.Chunks != chunks || ns.Bytes < minBytes {
			t.Fatalf("namespace %s: %d chunks, %d bytes; want %d chunks of at least %d bytes", name, ns.Chunks, ns.Bytes, chunks, minBytes)
		}
	}
	for _, n := range nodes {
		if v, ok := metricValue(t, n, "kvring_resp_namespace_fallbacks_total"); !ok || v != 0 {
			t.Fatalf("node %s: kvring_resp_namespace_fallbacks_total = %v (exported: %v), want 0", n.id, v, ok)
		}
	}
}

// TestLMCachesSequenceThroughOneNodeAndAnother: three LMCache writer
// processes (redis-py, LMCache's exact commands: SET kv_bytes, SET metadata,
// an EXISTS walk, GET metadata, GET kv_bytes) store 3 MiB and 32 MiB chunks
// in both key layouts through node 1; readers through node 2 and node 1
// find every chunk with the EXISTS walk, stop at the first chunk never
// written, and read every value byte-exact, without a nil kv_bytes (which
// would make LMCache delete the metadata). Each model, world size and
// worker (and dtype) is one namespace, and nothing fell back to the default
// one.
func TestLMCachesSequenceThroughOneNodeAndAnother(t *testing.T) {
	needTool(t, exec.Command("/usr/bin/python3", "-c", "import redis"), "Debian's python3-redis")
	nodes, addrs := respCluster(t, "--memory-limit", "512MiB")
	runLMCacheSeq(t, "plain", addrs[0], addrs[1], addrs[0])
	checkOneNamespacePerModelAndWorker(t, nodes, lmcacheSeqNamespaces, 2*lmcacheSeqChunks, lmcacheSeqChunkBytes)
}

// TestLMCachesSequenceThroughARedisCluster: the same with redis-py's
// RedisCluster (LMCache's redis-cluster:// tier) against three
// --resp-cluster nodes: writers start from node 1, readers from node 2 and
// node 3; each key is sent to its slot's primary, and a chunk's kv_bytes and
// metadata (different slots) still read back together.
func TestLMCachesSequenceThroughARedisCluster(t *testing.T) {
	needTool(t, exec.Command("/usr/bin/python3", "-c", "import redis.cluster"), "Debian's python3-redis")
	nodes, addrs := respCluster(t, "--resp-cluster", "--memory-limit", "512MiB")
	runLMCacheSeq(t, "cluster", addrs[0], addrs[1], addrs[2])
	checkOneNamespacePerModelAndWorker(t, nodes, lmcacheSeqNamespaces, 2*lmcacheSeqChunks, lmcacheSeqChunkBytes)
}

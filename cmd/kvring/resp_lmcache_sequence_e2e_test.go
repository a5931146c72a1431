package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		t.Fatalf("kvring namespaces lists %d:\n  %s\nwant one per model, world size, worker (and dtype):\n  %s",
			len(got), strings.Join(got[:min(len(got), 12)], "\n  "), strings.Join(want, "\n  "))
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

// lmcacheKey is chunk i's key in LMCache's current layout: a signed 64-bit
// chunk hash in hex (negative for odd i, as Python writes f"{h:x}").
func lmcacheKey(model string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprint(model, i)))
	v := int64(binary.BigEndian.Uint64(h[:]) >> 1)
	if i%2 == 1 {
		v = -v
	}
	return fmt.Sprintf("%s@1@0@%x@bfloat16", model, v)
}

// lmcacheValue is size bytes derived from key alone.
func lmcacheValue(key string, size int) []byte {
	seed := sha256.Sum256([]byte(key))
	b := make([]byte, size)
	rand.NewChaCha8(seed).Read(b)
	return b
}

// lmcacheMetadata is a 28-byte RemoteMetadata as LMCache writes it.
func lmcacheMetadata(size int) []byte {
	b := make([]byte, 28)
	binary.LittleEndian.PutUint32(b, uint32(size))
	return b
}

// TestOneModelsThousandsOfChunksShareOneNamespace: on default settings
// (the namespace limit is 1,024), one model's 1,200 chunks in LMCache's
// current layout, written pipelined (SET kv_bytes, SET metadata), are all
// +OK, all found by the EXISTS walk and read back byte-exact, and `kvring
// namespaces` lists one namespace for the model. (An older build mapped
// each chunk hash to a namespace of its own and answered -OOM too many
// namespaces at chunk 1,025; a mapping that did so again would list more
// namespaces here, or fall back to the default one.)
func TestOneModelsThousandsOfChunksShareOneNamespace(t *testing.T) {
	const chunks, size, batch = 1200, 4 << 10, 200
	const model = "Qwen/Qwen2.5-0.5B-Instruct"
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0")
	c := redis.NewClient(&redis.Options{Addr: n.respAddr(t), MaxRetries: -1, ReadTimeout: 30 * time.Second})
	defer c.Close()
	ctx := context.Background()
	for lo := 0; lo < chunks; lo += batch {
		p := c.Pipeline()
		var sets []*redis.StatusCmd
		for i := lo; i < min(lo+batch, chunks); i++ {
			k := lmcacheKey(model, i)
			sets = append(sets, p.Set(ctx, k+"kv_bytes", lmcacheValue(k, size), 0), p.Set(ctx, k+"metadata", lmcacheMetadata(size), 0))
		}
		p.Exec(ctx)
		for _, s := range sets {
			if v, err := s.Result(); err != nil || v != "OK" {
				t.Fatalf("%v = %q, %v", s.Args()[:2], v, err)
			}
		}
	}
	p := c.Pipeline()
	var walk []*redis.IntCmd
	for i := range chunks + 1 {
		walk = append(walk, p.Exists(ctx, lmcacheKey(model, i)+"metadata"))
	}
	p.Exec(ctx)
	for i, e := range walk {
		if want := int64(min(1, chunks-i)); e.Val() != want || e.Err() != nil {
			t.Fatalf("EXISTS of chunk %d's metadata = %d, %v; want %d", i, e.Val(), e.Err(), want)
		}
	}
	for lo := 0; lo < chunks; lo += batch {
		p := c.Pipeline()
		var gets []*redis.StringCmd
		for i := lo; i < min(lo+batch, chunks); i++ {
			k := lmcacheKey(model, i)
			gets = append(gets, p.Get(ctx, k+"metadata"), p.Get(ctx, k+"kv_bytes"))
		}
		p.Exec(ctx)
		for j, g := range gets {
			k := lmcacheKey(model, lo+j/2)
			want := lmcacheMetadata(size)
			if j%2 == 1 {
				want = lmcacheValue(k, size)
			}
			if got, err := g.Bytes(); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v: %d bytes, %v; want %d bytes", g.Args()[:2], len(got), err, len(want))
			}
		}
	}
	checkOneNamespacePerModelAndWorker(t, []*e2eNode{n}, []string{"resp:" + model + ":1:0:bfloat16"}, 2*chunks, chunks*size)
}

// TestASeventyBModelsChunkCrossesNodesOnDefaultSettings: LMCache's 256-token
// chunk of a 70B-class model (80 MiB) is under the default --max-chunk-size:
// SET through one node is +OK, and EXISTS and GET through each other node
// find it and return it byte-exact (one of them is not its holder).
func TestASeventyBModelsChunkCrossesNodesOnDefaultSettings(t *testing.T) {
	const size = 80 << 20
	_, addrs := respCluster(t, "--memory-limit", "512MiB")
	ctx := context.Background()
	k := lmcacheKey("meta-llama/Llama-3.1-70B-Instruct", 0)
	val := lmcacheValue(k, size)
	w := redis.NewClient(&redis.Options{Addr: addrs[0], MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer w.Close()
	if err := w.Set(ctx, k+"kv_bytes", val, 0).Err(); err != nil {
		t.Fatalf("SET of an 80 MiB kv_bytes: %v", err)
	}
	if err := w.Set(ctx, k+"metadata", lmcacheMetadata(size), 0).Err(); err != nil {
		t.Fatalf("SET of its metadata: %v", err)
	}
	for _, a := range addrs[1:] {
		r := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, ReadTimeout: time.Minute})
		if n, err := r.Exists(ctx, k+"metadata").Result(); n != 1 || err != nil {
			t.Fatalf("EXISTS metadata through %s = %d, %v", a, n, err)
		}
		got, err := r.Get(ctx, k+"kv_bytes").Bytes()
		r.Close()
		if err != nil || !bytes.Equal(got, val) {
			t.Fatalf("GET of the 80 MiB kv_bytes through %s: %d bytes, %v", a, len(got), err)
		}
	}
}

// TestAValueOverMaxChunkSizeIsRefusedAndTheConnectionGoesOn: on a node
// started with --max-chunk-size 8MiB, a 9 MiB SET is answered with an error
// that names the limit and the setting, and the same connection then
// answers PING and stores and reads a value of exactly 8 MiB. (Unit tests
// check the refusal at the default limit; this checks the flag reaches the
// port.)
func TestAValueOverMaxChunkSizeIsRefusedAndTheConnectionGoesOn(t *testing.T) {
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0", "--max-chunk-size", "8MiB")
	c := redis.NewClient(&redis.Options{Addr: n.respAddr(t), MaxRetries: -1, ReadTimeout: 30 * time.Second})
	defer c.Close()
	ctx := context.Background()
	conn := c.Conn()
	defer conn.Close()
	k := lmcacheKey("meta-llama/Llama-3.1-8B", 0)
	err := conn.Set(ctx, k+"kv_bytes", lmcacheValue(k, 9<<20), 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR value too large") || !strings.Contains(err.Error(), "8388608 bytes") ||
		!strings.Contains(err.Error(), "--max-chunk-size") {
		t.Fatalf("SET of 9 MiB on a node with --max-chunk-size 8MiB: %v; want an ERR naming 8388608 bytes and --max-chunk-size", err)
	}
	if v, err := conn.Ping(ctx).Result(); err != nil || v != "PONG" {
		t.Fatalf("PING after the refused value = %q, %v", v, err)
	}
	val := lmcacheValue(k, 8<<20)
	if err := conn.Set(ctx, k+"kv_bytes", val, 0).Err(); err != nil {
		t.Fatalf("SET of 8 MiB after the refused value: %v", err)
	}
	if got, err := conn.Get(ctx, k+"kv_bytes").Bytes(); err != nil || !bytes.Equal(got, val) {
		t.Fatalf("GET of the 8 MiB value: %d bytes, %v", len(got), err)
	}
}

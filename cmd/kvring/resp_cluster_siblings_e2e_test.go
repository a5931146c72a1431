package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/node"
)

// sibStem is the LMCache chunk key of chunk i (the current layout: model,
// world size, worker id, chunk hash, dtype); LMCache appends "kv_bytes" and
// "metadata" to it, without a hash tag.
func sibStem(i int) string {
	h := sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(i)))
	return fmt.Sprintf("Qwen/Qwen2.5-0.5B-Instruct@1@0@%x@bfloat16", h[:8])
}

// sibBytes is chunk i's kv_bytes: size bytes derived from i alone, so any
// read is checked against i.
func sibBytes(i, size int) []byte {
	return e2eChunk(uint64(i), size).Data
}

// sibMeta is chunk i's metadata: 28 bytes naming i, as LMCache's are about
// that long.
func sibMeta(i int) []byte {
	return fmt.Appendf(nil, "meta of chunk %014d", i)
}

// locateKeys asks n's admin API where keys are held (GET /v1/resp/locate).
func locateKeys(t *testing.T, n *e2eNode, keys ...string) map[string]node.RESPKeyLocation {
	t.Helper()
	var loc node.RESPLocation
	code, err := getJSON(n.admin, "/v1/resp/locate?"+url.Values{"key": keys}.Encode(), &loc)
	if err != nil || code != 200 {
		t.Fatalf("GET /v1/resp/locate at %s: %d, %v", n.id, code, err)
	}
	out := map[string]node.RESPKeyLocation{}
	for _, k := range loc.Keys {
		if len(k.Unanswered) > 0 {
			t.Fatalf("locate %s at %s: members did not answer: %v", k.Key, n.id, k.Unanswered)
		}
		out[k.Key] = k
	}
	return out
}

// heldByScan lists, per node, the keys it holds itself: in Redis Cluster
// mode SCAN walks the node it is sent to only.
func heldByScan(t *testing.T, nodes []*e2eNode, addrs []string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			out[iter.Val()] = append(out[iter.Val()], nodes[i].id)
		}
		err := iter.Err()
		c.Close()
		if err != nil {
			t.Fatalf("SCAN at %s: %v", a, err)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// TestClusterModeHoldsAValuesMetadataWithItsBytes: a Redis Cluster client
// writes LMCache's chunks (kv_bytes and metadata, no hash tag) to three
// nodes in --resp-cluster mode. Many chunks' two keys have slots whose
// primaries differ, yet each chunk's kv_bytes and metadata are held by the
// same node: the admin API's locate endpoint (and `kvring locate`) says so,
// and each node's own SCAN agrees. Both keys read back byte-exact.
func TestClusterModeHoldsAValuesMetadataWithItsBytes(t *testing.T) {
	nodes, addrs := respCluster(t, "--resp-cluster")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8, ReadTimeout: 30 * time.Second})
	defer cc.Close()
	ctx := context.Background()
	const chunks, size = 48, 16 << 10
	for i := range chunks {
		if err := cc.Set(ctx, sibStem(i)+"kv_bytes", sibBytes(i, size), 0).Err(); err != nil {
			t.Fatalf("SET chunk %d kv_bytes: %v", i, err)
		}
		if err := cc.Set(ctx, sibStem(i)+"metadata", sibMeta(i), 0).Err(); err != nil {
			t.Fatalf("SET chunk %d metadata: %v", i, err)
		}
	}
	//lint:ignore SA1019 CLUSTER SLOTS is what cluster clients (go-redis's own ClusterClient) read
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	apart := 0
	for i := range chunks {
		if slotOwner(t, slots, sibStem(i)+"kv_bytes") != slotOwner(t, slots, sibStem(i)+"metadata") {
			apart++
		}
	}
	if apart < chunks/4 {
		t.Fatalf("only %d of %d chunks have their two keys in slots of different primaries: the test proves little", apart, chunks)
	}
	scan := heldByScan(t, nodes, addrs)
	for i := range chunks {
		kv, meta := sibStem(i)+"kv_bytes", sibStem(i)+"metadata"
		loc := locateKeys(t, nodes[i%len(nodes)], kv, meta)
		lk, lm := loc[kv], loc[meta]
		if len(lk.Holders) != 1 || !slices.Equal(lk.Holders, lm.Holders) {
			t.Fatalf("chunk %d: kv_bytes (slot %d) held by %v, metadata (slot %d, placed by slot %d) by %v: want one and the same holder",
				i, lk.Slot, lk.Holders, lm.Slot, lm.PlaceSlot, lm.Holders)
		}
		if lm.PlaceSlot != lk.Slot || !slices.Equal(lk.Owners, lm.Owners) {
			t.Fatalf("chunk %d: metadata placed by slot %d with owners %v, kv_bytes in slot %d with owners %v", i, lm.PlaceSlot,
				lm.Owners, lk.Slot, lk.Owners)
		}
		if !slices.Equal(scan[kv], lk.Holders) || !slices.Equal(scan[meta], lk.Holders) {
			t.Fatalf("chunk %d: the nodes' SCANs find kv_bytes on %v and metadata on %v; locate says %v", i, scan[kv], scan[meta], lk.Holders)
		}
		got, err := cc.Get(ctx, kv).Bytes()
		if err != nil || !bytes.Equal(got, sibBytes(i, size)) {
			t.Fatalf("GET chunk %d kv_bytes: %d bytes, %v", i, len(got), err)
		}
		if got, err := cc.Get(ctx, meta).Bytes(); err != nil || !bytes.Equal(got, sibMeta(i)) {
			t.Fatalf("GET chunk %d metadata: %q, %v", i, got, err)
		}
	}
	t.Logf("%d of %d chunks have kv_bytes and metadata in slots of different primaries; each is held on one node", apart, chunks)
	kv := sibStem(0) + "kv_bytes"
	out := mustCLI(t, nil, "locate", "--admin", nodes[1].admin, kv, sibStem(0)+"metadata", "no-such-key").stdout
	holder := scan[kv][0]
	if strings.Count(out, holder) < 2 || !strings.Contains(out, "Redis Cluster mode") || !strings.Contains(out, "none (namespace not registered)") {
		t.Fatalf("kvring locate does not show both keys held by %s:\n%s", holder, out)
	}
}

// sibCheck is what one chunk reads as after the writes.
type sibCheck struct {
	kv, meta     []byte
	kvErr, mErr  error
	exists       int64
	existsErr    error
	kvAfter      []byte
	kvAfterErr   error
	metaAfter    []byte
	metaAfterErr error
}

// readChunk reads chunk i as LMCache would and as the invariant needs:
// GET metadata, GET kv_bytes, then EXISTS metadata and both GETs again.
func readChunk(ctx context.Context, cc *redis.ClusterClient, i int) sibCheck {
	kv, meta := sibStem(i)+"kv_bytes", sibStem(i)+"metadata"
	var r sibCheck
	r.meta, r.mErr = cc.Get(ctx, meta).Bytes()
	r.kv, r.kvErr = cc.Get(ctx, kv).Bytes()
	r.exists, r.existsErr = cc.Exists(ctx, meta).Result()
	r.kvAfter, r.kvAfterErr = cc.Get(ctx, kv).Bytes()
	r.metaAfter, r.metaAfterErr = cc.Get(ctx, meta).Bytes()
	return r
}

// TestEvictionNeverLeavesMetadataWithoutItsBytes: three --resp-cluster
// nodes with 8 MiB of memory each (no disk tier: kvring's default) take
// far more chunks (512 KiB kv_bytes and metadata) than they hold, from four
// writers through a Redis Cluster client, so the nodes evict. Afterwards,
// for every chunk: a metadata that reads back has its kv_bytes, byte-exact
// (a value's metadata is evicted with its bytes), and EXISTS of a metadata
// is 1 only when both its GETs return the bytes written.
func TestEvictionNeverLeavesMetadataWithoutItsBytes(t *testing.T) {
	nodes, addrs := respCluster(t, "--resp-cluster", "--memory-limit", "8MiB")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8, ReadTimeout: 30 * time.Second})
	defer cc.Close()
	ctx := context.Background()
	const chunks, size, writers = 160, 512 << 10, 4
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < chunks; i += writers {
				err := cc.Set(ctx, sibStem(i)+"kv_bytes", sibBytes(i, size), 0).Err()
				if err == nil {
					err = cc.Set(ctx, sibStem(i)+"metadata", sibMeta(i), 0).Err()
				}
				if err != nil {
					errs[w] = fmt.Errorf("chunk %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("writes: %v", err)
	}
	var evicted float64
	for _, n := range nodes {
		v, ok := metricValue(t, n, `kvring_store_evictions_total{reason="policy"}`)
		if !ok {
			t.Fatalf("node %s exports no policy evictions", n.id)
		}
		evicted += v
	}
	whole, kvOnly := 0, 0
	for i := range chunks {
		r := readChunk(ctx, cc, i)
		for _, err := range []error{r.mErr, r.kvErr, r.existsErr, r.kvAfterErr, r.metaAfterErr} {
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("chunk %d: a read failed: %v", i, err)
			}
		}
		switch {
		case r.mErr == nil && !bytes.Equal(r.meta, sibMeta(i)):
			t.Fatalf("chunk %d: metadata reads %q", i, r.meta)
		case r.kvErr == nil && !bytes.Equal(r.kv, sibBytes(i, size)):
			t.Fatalf("chunk %d: kv_bytes reads other bytes", i)
		case r.mErr == nil && r.kvErr != nil:
			t.Fatalf("chunk %d: its metadata reads back without its kv_bytes (evicted)", i)
		case r.exists == 1 && (r.kvAfterErr != nil || r.metaAfterErr != nil ||
			!bytes.Equal(r.kvAfter, sibBytes(i, size)) || !bytes.Equal(r.metaAfter, sibMeta(i))):
			t.Fatalf("chunk %d: EXISTS metadata = 1 but GET kv_bytes: %v, GET metadata: %v", i, r.kvAfterErr, r.metaAfterErr)
		case r.exists == 0 && r.mErr == nil && r.kvErr == nil:
			t.Fatalf("chunk %d: EXISTS metadata = 0 but both keys read back", i)
		case r.mErr == nil:
			whole++
		case r.kvErr == nil:
			kvOnly++
		}
	}
	t.Logf("%v chunks evicted by policy; of %d chunks, %d read back whole, %d kv_bytes without metadata", evicted, chunks, whole, kvOnly)
	if evicted == 0 || whole == 0 || whole == chunks {
		t.Fatalf("%v evictions, %d of %d chunks whole: the nodes did not evict (or kept nothing), the test proves nothing", evicted, whole, chunks)
	}
}

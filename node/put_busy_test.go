package node

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// TestConcurrentPutsOfTheSameChunksAreNeverFailed: engines that store the
// same prefix at the same moment (every engine that saw one system prompt)
// each learn the chunks are held, stored by one of them and already held for
// the others, never failed because another write was in progress.
func TestConcurrentPutsOfTheSameChunksAreNeverFailed(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 256<<20)
	ctx := context.Background()
	defer func() {
		var waits uint64
		for _, nd := range tc.nodes {
			var m dto.Metric
			if err := nd.svc.Metrics.PutBusyWait.(prometheus.Histogram).Write(&m); err != nil {
				t.Fatal(err)
			}
			waits += m.GetHistogram().GetSampleCount()
		}
		if !t.Failed() && waits == 0 {
			t.Error("no put waited for another write: kvring_put_busy_wait_seconds saw nothing")
		}
	}()
	for round := range 5 {
		var chunks []client.Chunk
		for i := range 64 {
			chunks = append(chunks, chunkOf(uint64(round*1000+i), 64<<10))
		}
		const engines = 4
		results := make([][]client.PutResult, engines)
		errs := make([]error, engines)
		var wg sync.WaitGroup
		for e := range engines {
			c := testClient(t, tc.nodes[e%len(tc.nodes)].addr, 2, 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[e], errs[e] = c.Put(ctx, chunks)
			}()
		}
		wg.Wait()
		stored := make([]int, len(chunks))
		for e := range engines {
			if errs[e] != nil {
				t.Fatalf("round %d engine %d: %v", round, e, errs[e])
			}
			for i, r := range results[e] {
				switch r.Status {
				case client.Stored:
					stored[i]++
				case client.AlreadyHeld:
				default:
					t.Fatalf("round %d engine %d chunk %d: %v (%s), want stored or already held", round, e, i, r.Status, r.Reason)
				}
				if len(r.Holders) == 0 {
					t.Fatalf("round %d engine %d chunk %d: no holders", round, e, i)
				}
			}
		}
		ids := make([]client.ChunkID, len(chunks))
		for i, c := range chunks {
			ids[i] = c.ID
			if stored[i] == 0 {
				t.Fatalf("round %d chunk %d: nobody stored it, yet everyone was told it is held", round, i)
			}
		}
		got, err := testClient(t, tc.nodes[0].addr, 0, 0).Get(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
				t.Fatalf("round %d chunk %d: found=%v reason=%q", round, i, g.Found, g.Reason)
			}
		}
	}
}

// TestAPutWaitingOnAnotherWriteEndsWhenThatWriteEndsUnsealed: a put that
// finds its chunk staged by another writer waits for it, and when that write
// ends without sealing the chunk (declined, aborted) the coordinator answers
// at once (failed, code ABORTED: "ended without storing it") instead of
// waiting out CommitTimeout (a minute here, past the client's call timeout),
// and the SDK puts the chunk once more: it is stored.
func TestAPutWaitingOnAnotherWriteEndsWhenThatWriteEndsUnsealed(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 2, 8<<20, func(_ int, cfg *Config) { cfg.CommitTimeout = time.Minute })
	c := testClientWith(t, client.Config{
		Conn: client.ConnConfig{Seeds: []string{tc.nodes[0].addr}}, Namespace: "test/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, DisableRouting: true, Logger: quietLogger(),
	})
	fp, err := c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ch client.Chunk // a chunk whose owner is node 1, so node 0 coordinates and polls it
	for n := uint64(1); ; n++ {
		ch = chunkOf(n, 1000)
		if p, _ := tc.Ring().Primary("test/model", ch.ID[:]); p.ID == tc.nodes[1].id {
			break
		}
	}
	ref := &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: fp}
	other, need, _, err := tc.nodes[1].svc.Owner.NewPrepare(ref, []*kvringv1.ChunkRef{{Id: ch.ID[:], Size: 1000, Crc32C: store.Checksum(ch.Data)}}, nil)
	if err != nil || len(need) != 1 {
		t.Fatalf("the other writer's stage: %v %v", err, need)
	}
	hasCalls := func() uint64 {
		n, _ := histogramOf(t, tc.nodes[1], "kvring_peer_request_duration_seconds", "op", "has")
		return n
	}
	before := hasCalls()
	done := make(chan []client.PutResult, 1)
	go func() {
		res, err := c.Put(context.Background(), []client.Chunk{ch})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "the put to poll the owner", func() bool { return hasCalls() > before })
	other.Abort()
	res := <-done
	if len(res) != 1 || res[0].Status != client.Stored {
		t.Fatalf("put result %+v, want stored by the SDK's second attempt once the other write ended unsealed", res)
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
)

// putCall is one Put of the stream, as the engine saw it.
type putCall struct {
	nums       []uint64 // e2eChunk numbers
	start, end time.Time
	res        []client.PutResult
	err        error
}

const (
	shutdownChunkSize = 64 << 10
	shutdownBatch     = 2
	shutdownWorkers   = 4
	shutdownMaxChunks = 1500 // ~94 MiB over three 256 MiB nodes: nothing is evicted
)

// TestSIGTERMWithPutsInFlightLosesNone: an engine streams puts to a node of a
// 3-node cluster (R=1) and the node gets SIGTERM. The node exits 0 after
// leaving the cluster and closing its store; every put call returns, either
// with a result per chunk or with an error; puts in flight at the signal
// finish; and every chunk reported stored reads back byte-exact once the node
// is restarted on the same data directory.
func TestSIGTERMWithPutsInFlightLosesNone(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	n1, victim, n3 := nodes[0], nodes[1], nodes[2]
	c, _ := newEngine(t, []string{victim.grpc}, 0, 0)
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })

	var (
		mu     sync.Mutex
		calls  []putCall
		stored atomic.Int64
		next   atomic.Uint64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	for range shutdownWorkers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				call := putCall{}
				var chunks []client.Chunk
				for range shutdownBatch {
					n := next.Add(1)
					if n > shutdownMaxChunks {
						return
					}
					call.nums = append(call.nums, n)
					chunks = append(chunks, e2eChunk(n, shutdownChunkSize))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				call.start = time.Now()
				call.res, call.err = c.Put(ctx, chunks)
				call.end = time.Now()
				cancel()
				mu.Lock()
				calls = append(calls, call)
				mu.Unlock()
				if call.err == nil && call.res[0].Status == client.Stored {
					stored.Add(1)
				}
				if call.err != nil { // the node is going or gone: do not spin
					<-stop
					return
				}
			}
		})
	}
	testutil.Eventually(t, "puts to be stored before the signal", 20*time.Second, func() bool { return stored.Load() >= 40 })
	signalled := time.Now()
	if err := victim.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim.Done():
		victim.holdPorts(t) // for the restart below
	case <-time.After(30 * time.Second):
		t.Fatalf("the node did not exit after SIGTERM:\n%s", victim.logs())
	}
	if code := victim.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, victim.logs())
	}
	for _, want := range []string{"shutting down", "left cluster", "store closed", "node stopped"} {
		if !strings.Contains(victim.logs(), want) {
			t.Errorf("the node's log lacks %q:\n%s", want, victim.logs())
		}
	}
	close(stop)
	returned := make(chan struct{})
	go func() { wg.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("a put call did not return after the node stopped")
	}

	// Every call ended with a result per chunk or an error, never both or neither.
	var want []uint64
	inFlight, inFlightStored, failedCalls := 0, 0, 0
	for _, call := range calls {
		if call.err != nil {
			failedCalls++
			if call.res != nil {
				t.Fatalf("a put returned results and an error: %+v %v", call.res, call.err)
			}
			continue
		}
		if len(call.res) != len(call.nums) {
			t.Fatalf("a put of %d chunks returned %d results", len(call.nums), len(call.res))
		}
		for i, r := range call.res {
			if r.Status < client.Stored || r.Status > client.Failed {
				t.Fatalf("chunk %d: status %v", call.nums[i], r.Status)
			}
			if r.Status.Held() {
				want = append(want, call.nums[i])
			}
		}
		if call.start.Before(signalled) && call.end.After(signalled) {
			inFlight++
			if call.res[0].Status == client.Stored {
				inFlightStored++
			}
		}
	}
	t.Logf("%d put calls: %d chunks held, %d calls failed with an error; %d calls in flight at SIGTERM (%d finished stored)",
		len(calls), len(want), failedCalls, inFlight, inFlightStored)
	if inFlight == 0 {
		t.Fatal("no put was in flight when the signal was sent")
	}

	// Restart the node on its data directory and addresses; once the cluster
	// and the namespace are whole again, every chunk reported held is read.
	again := restartNode(t, victim, "--join", n1.gossip)
	if again.id != victim.id {
		t.Fatalf("the restarted node is %s, was %s", again.id, victim.id)
	}
	testutil.Eventually(t, "the cluster to be whole again", 20*time.Second, func() bool {
		for _, n := range []*e2eNode{n1, again, n3} {
			if !seesRing(n, n1.id, again.id, n3.id) {
				return false
			}
		}
		return true
	})
	testutil.Eventually(t, "the restarted node to learn the namespace", 10*time.Second, func() bool {
		var got struct{ Namespaces []node.NamespaceInfo }
		code, err := getJSON(again.admin, "/v1/namespaces", &got)
		return err == nil && code == 200 && len(got.Namespaces) == 1
	})
	reader, _ := newEngine(t, []string{n1.grpc}, 0, 0)
	testutil.Eventually(t, "the reader to connect", 10*time.Second, func() bool { return reader.State().Status == client.ConnConnected })
	lost := 0
	for i := 0; i < len(want); i += 64 {
		batch := want[i:min(i+64, len(want))]
		ids := make([]client.ChunkID, len(batch))
		for j, n := range batch {
			ids[j] = e2eChunk(n, shutdownChunkSize).ID
		}
		got, err := reader.Get(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		for j, g := range got {
			if !g.Found || !bytes.Equal(g.Data, e2eChunk(batch[j], shutdownChunkSize).Data) {
				lost++
				t.Errorf("chunk %d was reported held but is not readable: %s", batch[j], g.Reason)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d chunks reported held were lost", lost, len(want))
	}
}

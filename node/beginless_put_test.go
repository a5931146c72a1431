package node

import (
	"context"
	"sync"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestAPutThatNeverBeginsIsEnded: Put streams that never send their begin
// message used to have no timeout at all (20 connections × 256 such streams
// got no answer for 75 s). Each now ends with DeadlineExceeded after
// PutIdleTimeout, well before the client's own deadline.
func TestAPutThatNeverBeginsIsEnded(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 1, 16<<20, func(_ int, cfg *Config) { cfg.PutIdleTimeout = 500 * time.Millisecond })
	cc, err := grpc.NewClient(tc.nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// A bound on a hang, far past the idle limit: an error that comes from
	// this deadline is a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			stream, err := kvringv1.NewCacheClient(cc).Put(ctx)
			if err != nil {
				errs <- err
				return
			}
			_, err = stream.Recv() // sends nothing, waits for the node
			if ctx.Err() != nil {
				t.Errorf("a begin-less put was still open when the test's own deadline passed")
				return
			}
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("a begin-less put ended with %v, want DeadlineExceeded from the node", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestAClientsBeginlessFloodIsBoundedAndOthersStillPut: every put stream
// that never began used to hold a reader until the idle timeout, however
// many one client opened (5,120 from one host, all ended and re-opened in
// the same instant every 10 s). Now a client gets PutMaxAwaitingBegin
// readers; its further streams wait for one, holding only their handler,
// and are refused with ResourceExhausted (counted) at their begin
// deadline, while another client's put is stored meanwhile.
func TestAClientsBeginlessFloodIsBoundedAndOthersStillPut(t *testing.T) {
	t.Parallel()
	const bound, flood = 4, 24
	tc := newTestClusterWith(t, 1, 16<<20, func(_ int, cfg *Config) {
		cfg.PutIdleTimeout, cfg.PutMaxAwaitingBegin = 2*time.Second, bound
	})
	nd := tc.nodes[0]
	good := testClient(t, nd.addr, 1, 1) // its own connection: on loopback, another client
	cc, err := grpc.NewClient(nd.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	codesSeen := make(chan codes.Code, flood)
	var wg sync.WaitGroup
	for range flood {
		wg.Go(func() {
			stream, err := kvringv1.NewCacheClient(cc).Put(ctx)
			if err == nil {
				_, err = stream.Recv()
			}
			codesSeen <- status.Code(err)
		})
	}
	res, err := good.Put(ctx, []client.Chunk{chunkOf(1, 64<<10)})
	if err != nil || res[0].Status != client.Stored {
		t.Fatalf("another client's put during the flood: %v %+v", err, res)
	}
	wg.Wait()
	close(codesSeen)
	count := map[codes.Code]int{}
	for c := range codesSeen {
		count[c]++
	}
	if ctx.Err() != nil {
		t.Fatal("the test's own deadline ended the flood, not the node")
	}
	// Each reader is ended at its deadline and hands its turn to the
	// longest waiting stream, which reads until its own deadline if that
	// has not passed yet: how many are refused depends on the deadlines'
	// jitter, but not none.
	if count[codes.ResourceExhausted] == 0 || count[codes.DeadlineExceeded] < bound ||
		count[codes.ResourceExhausted]+count[codes.DeadlineExceeded] != flood {
		t.Fatalf("the flood's %d streams ended with %v, want some ResourceExhausted and at least %d DeadlineExceeded, nothing else",
			flood, count, bound)
	}
	if got := promtestutil.ToFloat64(nd.svc.Metrics.PutBeginRefused); got != float64(count[codes.ResourceExhausted]) {
		t.Fatalf("kvring_put_begin_refused_total = %v, want %d", got, count[codes.ResourceExhausted])
	}
}

package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

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

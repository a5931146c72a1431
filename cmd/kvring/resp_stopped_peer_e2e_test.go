package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/internal/testutil"
)

// stoppedPeerReads counts what reads through a node returned while a peer
// was stopped and after it resumed.
type stoppedPeerReads struct {
	mu               sync.Mutex
	ok, errs, nils   int
	firstNil, errMsg string
}

func (s *stoppedPeerReads) add(key string, got, want []byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case errors.Is(err, redis.Nil) || (err == nil && got == nil):
		s.nils++
		if s.firstNil == "" {
			s.firstNil = key
		}
	case err != nil:
		s.errs++
		s.errMsg = err.Error()
	case !bytes.Equal(got, want):
		s.nils++ // other bytes: as wrong as a nil
		s.firstNil = key + " (other bytes)"
	default:
		s.ok++
	}
}

// TestReadsThroughAStoppedPeerAreErrorsNeverNil: through three real nodes,
// values are written and acknowledged; then one node is frozen (SIGSTOP)
// long enough to be declared dead, and resumed (SIGCONT), while GET, MGET
// and EXISTS go on through another node. Every read returns the right
// bytes, or an error reply naming why (the stopped peer did not answer, or
// lately died); never a nil or a 0 for an acknowledged key nobody evicted,
// before, during or after the peer's return.
func TestReadsThroughAStoppedPeerAreErrorsNeverNil(t *testing.T) {
	nodes, addrs := respCluster(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addrs[0], MaxRetries: -1, ReadTimeout: 30 * time.Second, PoolSize: 4})
	defer c.Close()
	vals := map[string][]byte{}
	var keys []string
	for i := range 60 {
		k := fmt.Sprintf("Qwen/Qwen2.5-0.5B-Instruct@1@0@%016x@bfloat16kv_bytes", 0x5700+i)
		v := make([]byte, 256<<10)
		rand.Read(v)
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		vals[k] = v
		keys = append(keys, k)
	}
	var reads stoppedPeerReads
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() { readUntil(ctx, c, keys, vals, w, &reads, stop) })
	}
	victim := nodes[2]
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "node 1 to see the stopped node dead", 60*time.Second, func() bool {
		return !seesRing(nodes[0], nodes[0].id, nodes[1].id, victim.id)
	})
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "every node to see three members again", 60*time.Second, func() bool {
		for _, n := range nodes {
			if !seesRing(n, nodes[0].id, nodes[1].id, victim.id) {
				return false
			}
		}
		return true
	})
	// Reads go on through the rejoin and a while after it: that is where
	// nils were seen.
	var after stoppedPeerReads
	for range 40 {
		readRound(ctx, c, keys, vals, 0, &after)
	}
	close(stop)
	wg.Wait()
	t.Logf("while stopped: %d right, %d errors (last %q), %d nil; after: %d right, %d errors, %d nil",
		reads.ok, reads.errs, reads.errMsg, reads.nils, after.ok, after.errs, after.nils)
	if reads.nils > 0 || after.nils > 0 {
		t.Fatalf("%d reads answered nil, 0 or other bytes for acknowledged keys (first %s; after the rejoin: %d, first %s)\n%s",
			reads.nils+after.nils, reads.firstNil, after.nils, after.firstNil, nodes[0].logs())
	}
	if reads.errs == 0 {
		t.Fatal("no read failed while a holder was stopped: the test did not reach it")
	}
	if after.ok == 0 {
		t.Fatalf("no read succeeded after the rejoin (last error %q)", after.errMsg)
	}
}

// readUntil reads keys round after round until stop is closed.
func readUntil(ctx context.Context, c *redis.Client, keys []string, vals map[string][]byte, w int, s *stoppedPeerReads, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		readRound(ctx, c, keys, vals, w, s)
	}
}

// readRound reads every key once, by GET, by EXISTS and by MGET of two,
// starting at an offset of w.
func readRound(ctx context.Context, c *redis.Client, keys []string, vals map[string][]byte, w int, s *stoppedPeerReads) {
	for i := range keys {
		k := keys[(i+w*7)%len(keys)]
		switch i % 3 {
		case 0:
			got, err := c.Get(ctx, k).Bytes()
			s.add(k, got, vals[k], err)
		case 1:
			n, err := c.Exists(ctx, k).Result()
			var got []byte
			if n == 1 {
				got = vals[k]
			}
			s.add(k+" (EXISTS)", got, vals[k], err)
		default:
			k2 := keys[(i+1)%len(keys)]
			got, err := c.MGet(ctx, k, k2).Result()
			if err != nil {
				s.add(k+" (MGET)", nil, vals[k], err)
				continue
			}
			for j, key := range []string{k, k2} {
				b, _ := got[j].(string)
				if got[j] == nil {
					s.add(key+" (MGET)", nil, vals[key], nil)
				} else {
					s.add(key+" (MGET)", []byte(b), vals[key], nil)
				}
			}
		}
	}
}

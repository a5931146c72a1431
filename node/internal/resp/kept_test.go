package resp

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

// TestSetOfAStoredKeyWritesNothing: a SET or MSET of a key stored already
// as its namespace asks is answered without a write (values are immutable:
// the first stays), and its value is read past, not into memory.
func TestSetOfAStoredKeyWritesNothing(t *testing.T) {
	s, fc := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "first", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	before := fc.publishN
	fc.mu.Unlock()
	if err := c.Set(ctx, "k", "first", 0).Err(); err != nil {
		t.Fatalf("SET of a stored key with its bytes: %v, want OK", err)
	}
	if n, err := c.SetNX(ctx, "k", "third", 0).Result(); err != nil || n {
		t.Fatalf("SETNX of a stored key = %v, %v; want false", n, err)
	}
	if old, err := c.SetArgs(ctx, "k", "fourth", redis.SetArgs{Get: true}).Result(); err != nil || old != "first" {
		t.Fatalf("SET GET of a stored key = %q, %v", old, err)
	}
	fc.mu.Lock()
	writes := fc.publishN - before
	fc.mu.Unlock()
	if writes != 0 {
		t.Fatalf("%d writes for SETs of a stored key, want none", writes)
	}
	if err := c.MSet(ctx, "k", "first", "j", "new").Err(); err != nil {
		t.Fatalf("MSET of a stored and a new key: %v", err)
	}
	if v := c.MGet(ctx, "k", "j").Val(); v[0] != "first" || v[1] != "new" {
		t.Fatalf("MGET = %v, want [first new]", v)
	}
	if got := testutil.ToFloat64(s.m.keptValues); got != 4 {
		t.Fatalf("kvring_resp_kept_values_total = %v, want 4", got)
	}
	if used := s.cfg.Store.Stats().BlobBytes; used != 0 {
		t.Fatalf("%d bytes of blobs left behind", used)
	}
}

// TestSetOfAKeyEvictedWhileItsValueArrivedFails: a value read past because
// its key was stored, whose chunk is gone when the command runs, is an
// error reply the client can retry on (TRYAGAIN), never OK.
func TestSetOfAKeyEvictedWhileItsValueArrivedFails(t *testing.T) {
	s, fc := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	calls := 0
	fc.mu.Lock()
	fc.kept = func(Key) bool { calls++; return calls == 1 } // kept while the value arrives, gone after
	fc.mu.Unlock()
	err := c.Set(ctx, "k", "v", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), prefixTryAgain) {
		t.Fatalf("SET = %v, want a TRYAGAIN error", err)
	}
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET after the failed SET = %v, want nil", err)
	}
}

// TestASetOfOtherBytesIsNeverOK: a SET of a key that holds other bytes is
// an error reply, whether the value was read past (this node keeps the key)
// or written through the cluster (an owner answered it holds the key); the
// held bytes stay, and a SET of the same bytes is OK both ways.
func TestASetOfOtherBytesIsNeverOK(t *testing.T) {
	for _, viaCluster := range []bool{false, true} {
		s, fc := testServer(t, nil)
		if viaCluster {
			fc.mu.Lock()
			fc.kept = func(Key) bool { return false } // never read past: the write goes to the cluster
			fc.mu.Unlock()
		}
		c := client(t, s, 2)
		ctx := context.Background()
		v1, v2 := strings.Repeat("a", 300<<10), strings.Repeat("b", 300<<10)
		if err := c.Set(ctx, "m@1@0@abc@half", v1, 0).Err(); err != nil {
			t.Fatal(err)
		}
		err := c.Set(ctx, "m@1@0@abc@half", v2, 0).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR") || !strings.Contains(err.Error(), "holds other bytes") {
			t.Errorf("via cluster %v: SET of other bytes = %v, want an ERR saying the key holds other bytes", viaCluster, err)
		}
		// Only the last byte differs: the checksum of a value read past
		// covers its whole length, past the connection's buffer.
		if err := c.Set(ctx, "m@1@0@abc@half", v1[:len(v1)-1]+"b", 0).Err(); err == nil {
			t.Errorf("via cluster %v: SET of bytes that differ in the last one answered OK", viaCluster)
		}
		if err := c.Set(ctx, "m@1@0@abc@half", v1, 0).Err(); err != nil {
			t.Errorf("via cluster %v: SET of the same bytes = %v, want OK", viaCluster, err)
		}
		if got := c.Get(ctx, "m@1@0@abc@half").Val(); got != v1 {
			t.Errorf("via cluster %v: GET returned %d other bytes", viaCluster, len(got))
		}
		if err := c.MSet(ctx, "m@1@0@abc@half", v2, "m@1@0@def@half", "x").Err(); err == nil {
			t.Errorf("via cluster %v: MSET with other bytes for a held key answered OK", viaCluster)
		}
	}
}

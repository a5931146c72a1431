package resp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

// TestReadsOfKeysAnUnansweringMemberMayHoldAreErrorsNotNil: a GET, MGET,
// pipelined GETs, EXISTS, STRLEN and GETRANGE of a key that a member which
// did not answer may hold answer an error reply naming it, never nil or 0
// (LMCache deletes a chunk's metadata when its kv_bytes reads nil); a key
// that no member holds is still nil.
func TestReadsOfKeysAnUnansweringMemberMayHoldAreErrorsNotNil(t *testing.T) {
	s, fc := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.Set(ctx, "m@1@0@ab12@half", "here", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	fc.unreachable = func(k Key) bool { return strings.Contains(k.Name, "fa77") }
	fc.mu.Unlock()
	far := "m@1@0@fa77@half"
	wantTryAgain := func(what string, err error) {
		t.Helper()
		if err == nil || err == redis.Nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") || !strings.Contains(err.Error(), "node far") {
			t.Errorf("%s: %v, want a TRYAGAIN error naming the member", what, err)
		}
	}
	_, err := c.Get(ctx, far).Result()
	wantTryAgain("GET", err)
	_, err = c.Exists(ctx, "m@1@0@ab12@half", far).Result()
	wantTryAgain("EXISTS", err)
	_, err = c.StrLen(ctx, far).Result()
	wantTryAgain("STRLEN", err)
	_, err = c.GetRange(ctx, far, 0, 3).Result()
	wantTryAgain("GETRANGE", err)
	_, err = c.MGet(ctx, "m@1@0@ab12@half", far, "m@1@0@none@half").Result()
	wantTryAgain("MGET", err)
	if vals, err := c.MGet(ctx, "m@1@0@ab12@half", "m@1@0@none@half").Result(); err != nil || vals[0] != "here" || vals[1] != nil {
		t.Errorf("MGET of keys that can be read = %v, %v", vals, err)
	}
	p := c.Pipeline()
	g1, g2, g3 := p.Get(ctx, "m@1@0@ab12@half"), p.Get(ctx, far), p.Get(ctx, "m@1@0@none@half")
	p.Exec(ctx)
	if g1.Val() != "here" || g3.Err() != redis.Nil {
		t.Errorf("pipelined GETs: %v %v", g1.Err(), g3.Err())
	}
	wantTryAgain("pipelined GET", g2.Err())
	if err := c.Get(ctx, "m@1@0@none@half").Err(); err != redis.Nil {
		t.Errorf("GET of a key no member may hold: %v, want nil", err)
	}
	if n, err := c.Exists(ctx, "m@1@0@none@half").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of a key no member may hold = %d, %v; want 0", n, err)
	}
}

// TestKeysPastTheNamespaceLimitAreWrittenToTheDefaultNamespace: a key shape
// that would make more namespaces than the node may hold never fails a
// write: its keys go to the default namespace, are counted, and read back
// (GET, EXISTS) through their own names.
func TestKeysPastTheNamespaceLimitAreWrittenToTheDefaultNamespace(t *testing.T) {
	s, fc := testServer(t, func(_ *Config, fc *fakeCluster) { fc.maxNS = 3 })
	c := client(t, s, 2)
	ctx := context.Background()
	for i := range 10 {
		k := fmt.Sprintf("session-%d@chunk", i) // a shape whose namespace field differs per key
		if err := c.Set(ctx, k, fmt.Sprint("v", i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if n := testutil.ToFloat64(s.m.fallbacks); n < 7 {
		t.Errorf("%v keys counted as written to the default namespace, want at least 7", n)
	}
	for i := range 10 {
		k := fmt.Sprintf("session-%d@chunk", i)
		if v, err := c.Get(ctx, k).Result(); err != nil || v != fmt.Sprint("v", i) {
			t.Errorf("GET %s = %q, %v", k, v, err)
		}
		if n, err := c.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s = %d, %v", k, n, err)
		}
	}
	fc.mu.Lock()
	n := len(fc.ns)
	fc.mu.Unlock()
	if n > 4 {
		t.Errorf("%d namespaces, over the limit of 3 and the default one", n)
	}
}

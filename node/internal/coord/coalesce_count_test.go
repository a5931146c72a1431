package coord

import (
	"testing"

	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// runKeysOf expands a request's runs to one key per id, as the owner does
// before it counts them.
func runKeysOf(req *kvringv1.HasRequest) [][]byte {
	var keys [][]byte
	for _, r := range req.GetGroups() {
		for range r.GetCount() {
			keys = append(keys, r.GetKey())
		}
	}
	return keys
}

// lookupsCounted is how many lookups of group key a spread.Counter counts
// for reqs: the threshold at which key turns hot, found by trying each.
func lookupsCounted(t *testing.T, reqs []*kvringv1.HasRequest, key byte) int {
	t.Helper()
	n := 0
	for threshold := 1; threshold <= 16; threshold++ {
		hot := false
		c := spread.NewCounter(spread.CounterConfig{Threshold: threshold, OnHot: func(h spread.Hot) {
			hot = hot || h.Key.Place[0] == key
		}})
		for _, r := range reqs {
			c.Asked("ns", r.GetIds(), runKeysOf(r))
		}
		if hot {
			n = threshold
		}
	}
	return n
}

// TestHasCoalescerCountsLookupsAlike: the owner counts one lookup of a group
// per run of equal keys in a row, so a merged request counts each group as
// often as the requests sent one by one would; two requests ending and
// beginning with the same group would count one lookup, and pickBatch
// keeps them apart.
func TestHasCoalescerCountsLookupsAlike(t *testing.T) {
	g, h := byte(230), byte(240)
	queue := []*hasWait{
		{req: hasReq("ns", 10, 2, g)}, {req: hasReq("ns", 20, 2, g)}, {req: hasReq("ns", 30, 2, h)},
		{req: hasReq("ns", 40, 2, g)}, {req: hasReq("ns", 50, 2, h)},
	}
	var separate []*kvringv1.HasRequest
	for _, w := range queue {
		separate = append(separate, w.req)
	}
	batch, alone, rest := pickBatch(queue, 100)
	if len(rest) != 0 {
		t.Fatalf("%d requests left for the next call", len(rest))
	}
	sent := []*kvringv1.HasRequest{mergeHas(batch)}
	for _, w := range alone {
		sent = append(sent, w.req)
	}
	for _, key := range []byte{g, h} {
		if got, want := lookupsCounted(t, sent, key), lookupsCounted(t, separate, key); got != want {
			t.Errorf("group %d: merged requests count %d lookups, separate ones %d", key, got, want)
		}
	}
	if len(batch) < 4 {
		t.Errorf("batch of %d of 5 requests, want at least 4", len(batch))
	}
	naive := &kvringv1.HasRequest{Ids: append(queue[0].req.GetIds(), queue[1].req.GetIds()...),
		Groups: append(queue[0].req.GetGroups(), queue[1].req.GetGroups()...)}
	if got := lookupsCounted(t, []*kvringv1.HasRequest{naive}, g); got != 1 {
		t.Errorf("two requests of one group side by side count %d lookups; the owner changed, and pickBatch's rule with it", got)
	}
}

package namespace

import (
	"bytes"
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Groups are a request's placement keys, resolved from its group runs.
type Groups struct {
	// Keys is the ring key per request position; it aliases the request.
	Keys [][]byte
	// Of is the group ordinal per request position, non-decreasing from 0.
	Of []int
	// N is the number of groups.
	N int
	// Grouped reports whether the namespace places chunks by groups (else
	// every key is the chunk's own id).
	Grouped bool
}

// ResolveGroups resolves the placement keys of ids from a request's runs
// and checks them: runs are required exactly when the namespace groups
// chunks (optional is true: a grouped request without runs places every
// chunk by its id, Grouped false), each key is 32 bytes, and the runs cover
// the ids exactly. Adjacent runs with one key are one group. Errors are
// ErrInvalidArgument naming the field.
func ResolveGroups(rec *kvringv1.NamespaceRecord, ids [][]byte, runs []*kvringv1.GroupRun, optional bool) (*Groups, error) {
	k := GroupSize(rec.GetSchema())
	if k == 1 || (optional && len(runs) == 0) {
		if k == 1 && len(runs) > 0 {
			return nil, fmt.Errorf("%w: namespace %q places every chunk by its own id: the request must not carry groups",
				transfer.ErrInvalidArgument, rec.GetName())
		}
		g := &Groups{Keys: make([][]byte, len(ids)), Of: make([]int, len(ids)), N: len(ids)}
		for i, id := range ids {
			g.Keys[i], g.Of[i] = id, i
		}
		return g, nil
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: namespace %q places chunks in groups of %d: the request must carry each chunk's group key (groups)",
			transfer.ErrInvalidArgument, rec.GetName(), k)
	}
	g := &Groups{Keys: make([][]byte, len(ids)), Of: make([]int, len(ids)), Grouped: true}
	i := 0
	var last []byte
	for r, run := range runs {
		key, count := run.GetKey(), int(run.GetCount())
		switch {
		case len(key) != 32:
			return nil, fmt.Errorf("%w: groups[%d].key is %d bytes, want 32", transfer.ErrInvalidArgument, r, len(key))
		case count < 1 || count > len(ids)-i:
			return nil, fmt.Errorf("%w: groups[%d].count %d: the runs must cover the %d ids exactly",
				transfer.ErrInvalidArgument, r, count, len(ids))
		}
		if r == 0 || !bytes.Equal(key, last) {
			g.N++
		}
		last = key
		for range count {
			g.Keys[i], g.Of[i] = key, g.N-1
			i++
		}
	}
	if i != len(ids) {
		return nil, fmt.Errorf("%w: the groups cover %d of %d ids", transfer.ErrInvalidArgument, i, len(ids))
	}
	return g, nil
}

// Runs encodes per-position keys as group runs (adjacent equal keys share
// one run). The runs alias keys.
func Runs(keys [][]byte) []*kvringv1.GroupRun {
	var runs []*kvringv1.GroupRun
	for _, k := range keys {
		if n := len(runs); n > 0 && bytes.Equal(runs[n-1].Key, k) {
			runs[n-1].Count++
			continue
		}
		runs = append(runs, &kvringv1.GroupRun{Key: k, Count: 1})
	}
	return runs
}

package transfer

import (
	"bytes"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// GroupRuns encodes per-chunk placement keys as the wire's group runs
// (PutBegin.groups, PrepareBegin.groups, ...): adjacent equal keys share
// one run. No keys give no runs. The runs alias keys.
func GroupRuns(keys [][]byte) []*kvringv1.GroupRun {
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

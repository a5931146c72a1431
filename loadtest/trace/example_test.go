package trace_test

import (
	"fmt"
	"strings"

	"github.com/kvring/kvring/loadtest/trace"
)

func Example() {
	const jsonl = `{"timestamp": 0, "input_length": 1100, "output_length": 8, "hash_ids": [1, 2, 3]}
{"timestamp": 250, "input_length": 1200, "output_length": 4, "hash_ids": [1, 2, 4]}
`
	reqs, err := trace.Read(strings.NewReader(jsonl))
	if err != nil {
		panic(err)
	}
	s := trace.Stats(reqs)
	hits, total := trace.Replay(reqs, trace.NewLRU(2))
	fmt.Printf("%d requests, %d blocks, %d distinct\n", s.Requests, s.BlocksReferenced, s.DistinctIDs)
	fmt.Printf("unbounded %.3f, LRU(2) %d/%d, optimum(2) %.3f\n",
		s.UnboundedHitRatio, hits, total, trace.Belady(reqs, 2))
	// Output:
	// 2 requests, 6 blocks, 4 distinct
	// unbounded 0.333, LRU(2) 0/6, optimum(2) 0.333
}

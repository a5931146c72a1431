package placement

import (
	"fmt"
	"math"

	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/loadtest/trace"
	"github.com/kvring/kvring/ring"
)

// ChunkTokens is the chunk size the simulator assumes: an engine with 16-token pages sends one chunk a page,
// so a 512-token Mooncake block is 32 chunks.
const ChunkTokens = 16

// FromMooncake turns Mooncake requests into a Workload: block i of a request is split into
// ceil(tokens/ChunkTokens) chunks whose ids are loadtest.BlockChunkIDs(block, n), as `kvring bench` sends
// them, and each id is hashed to a partition of cfg under namespace. It reads reqs only.
func FromMooncake(name string, reqs []trace.Request, cfg ring.Config, namespace string) (*Workload, error) {
	part, err := newPartitioner(cfg, namespace)
	if err != nil {
		return nil, fmt.Errorf("cannot build workload %q: %w", name, err)
	}
	const perBlock = trace.BlockTokens / ChunkTokens
	w := &Workload{Name: name, Prompts: make([][]int32, len(reqs)), Partitions: cfg.PartitionCount}
	base := make(map[int64]int32) // block id -> dense index of its chunk 0
	for r, req := range reqs {
		prompt := make([]int32, 0, (req.InputLength+ChunkTokens-1)/ChunkTokens)
		for i, block := range req.HashIDs {
			tokens := req.BlockTokenCount(i)
			b, ok := base[block]
			if !ok {
				if len(w.Parts) > math.MaxInt32-perBlock {
					return nil, fmt.Errorf("cannot build workload %q: more than 2^31 chunks", name)
				}
				b = int32(len(w.Parts))
				base[block] = b
				for _, id := range loadtest.BlockChunkIDs(block, perBlock) {
					w.Parts = append(w.Parts, part.partition(id))
				}
			}
			for j := range (tokens + ChunkTokens - 1) / ChunkTokens {
				prompt = append(prompt, b+int32(j))
			}
		}
		w.Prompts[r] = prompt
	}
	return w, nil
}

// MooncakeFile reads a Mooncake JSONL trace and builds its Workload (see FromMooncake).
func MooncakeFile(name, path string, cfg ring.Config, namespace string) (*Workload, error) {
	reqs, err := trace.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot build workload %q: %w", name, err)
	}
	return FromMooncake(name, reqs, cfg, namespace)
}

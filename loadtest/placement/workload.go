package placement

import (
	"fmt"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/ring"
)

// DefaultNamespace is the namespace whose partitions chunk ids are hashed into. Any fixed string gives the
// same statistics; it names a model with 16-token chunks like a real namespace would.
const DefaultNamespace = "placementsim/16"

// Workload is a trace ready to replay: prompts in arrival order, each the dense indices of its chunks in
// prefix order. Chunk i's id hashes to ring partition Parts[i] (of the partition count the Workload was built
// for). Two prompts share their first k chunks exactly when their first k indices are equal.
type Workload struct {
	Name    string
	Prompts [][]int32
	Parts   []int32
	// Partitions is the ring partition count Parts was computed for; Simulate checks the Cluster agrees.
	Partitions int
}

// References returns the number of chunk references: the sum of the prompts' lengths.
func (w *Workload) References() int {
	n := 0
	for _, p := range w.Prompts {
		n += len(p)
	}
	return n
}

// partitioner hashes chunk ids to partitions exactly as the ring does.
type partitioner struct {
	r         *ring.Ring
	namespace string
}

// newPartitioner returns a partitioner for cfg; it builds an empty ring, which only knows partitions.
func newPartitioner(cfg ring.Config, namespace string) (partitioner, error) {
	r, err := ring.New(nil, 0, cfg)
	if err != nil {
		return partitioner{}, fmt.Errorf("cannot build the partitioner: %w", err)
	}
	return partitioner{r: r, namespace: namespace}, nil
}

func (p partitioner) partition(id client.ChunkID) int32 {
	return int32(p.r.Partition(p.namespace, id[:]))
}

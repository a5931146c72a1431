package placement

import (
	"fmt"
	"slices"

	"github.com/kvring/kvring/ring"
)

// MaxReplicas is the most ring owners a scheme may spread a group over. The simulator's ring config asks the
// ring for this many owners per partition; that does not change any partition's primary or first k owners.
const MaxReplicas = 8

// Cluster is a ring's owner table, flattened for the replay: partition p's owners, primary first, are
// Owners[p*Width : (p+1)*Width], as indices into IDs (sorted member IDs). It is immutable once built.
type Cluster struct {
	IDs        []string
	Width      int
	Owners     []int32
	Partitions int
	// PartitionsMoved is set on a Cluster built by Join: partitions whose primary differs from the base's.
	PartitionsMoved int
}

// NodeIDs returns the member IDs "node-0" … "node-(n-1)".
func NodeIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%d", i)
	}
	return ids
}

// SimRingConfig returns cfg with ReplicationFactor raised to MaxReplicas, which changes no owner the node
// would compute (the first k owners of a partition do not depend on it).
func SimRingConfig(cfg ring.Config) ring.Config {
	cfg.ReplicationFactor = max(cfg.ReplicationFactor, MaxReplicas)
	return cfg
}

// NewCluster builds the ring of the given member IDs with cfg (see SimRingConfig) and returns its owner table.
func NewCluster(ids []string, cfg ring.Config) (*Cluster, error) {
	c, _, err := newCluster(ids, cfg)
	return c, err
}

func newCluster(ids []string, cfg ring.Config) (*Cluster, *ring.Ring, error) {
	members := make([]ring.Member, len(ids))
	for i, id := range ids {
		members[i] = ring.Member{ID: id}
	}
	r, err := ring.New(members, 1, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot build a ring of %d members: %w", len(ids), err)
	}
	sorted := make([]string, r.Len())
	for i, m := range r.Members() {
		sorted[i] = m.ID
	}
	c := &Cluster{IDs: sorted, Width: min(cfg.ReplicationFactor, len(ids)), Partitions: cfg.PartitionCount}
	c.Owners = make([]int32, 0, c.Width*cfg.PartitionCount)
	for p := range cfg.PartitionCount {
		for _, m := range r.PartitionOwners(p, c.Width) {
			i, ok := slices.BinarySearch(sorted, m.ID)
			if !ok {
				panic("BUG: placement: ring returned an owner that is not a member")
			}
			c.Owners = append(c.Owners, int32(i))
		}
	}
	return c, r, nil
}

// Topology is a cluster and the clusters one extra member joining it would give, one per joiner.
type Topology struct {
	Base  *Cluster
	Joins []*Cluster
}

// NewTopology builds the ring of "node-0" … "node-(n-1)" and, for each of joins joiners "node-n",
// "node-(n+1)", …, the ring with that one member added.
func NewTopology(n, joins int, cfg ring.Config) (*Topology, error) {
	ids := NodeIDs(n + joins)
	base, baseRing, err := newCluster(ids[:n], cfg)
	if err != nil {
		return nil, err
	}
	t := &Topology{Base: base}
	for j := range joins {
		c, r, err := newCluster(append(slices.Clone(ids[:n]), ids[n+j]), cfg)
		if err != nil {
			return nil, fmt.Errorf("cannot build the join of %s: %w", ids[n+j], err)
		}
		c.PartitionsMoved = ring.Moved(baseRing, r)
		t.Joins = append(t.Joins, c)
	}
	return t, nil
}

// N returns the base cluster's member count.
func (t *Topology) N() int { return len(t.Base.IDs) }

// owners returns partition p's first h owners.
func (c *Cluster) owners(p int32, h int) []int32 {
	return c.Owners[int(p)*c.Width : int(p)*c.Width+min(h, c.Width)]
}

// PartitionSkew returns max/mean over members of the partitions each is primary for.
func (c *Cluster) PartitionSkew() float64 {
	primaries := make([]int32, len(c.IDs))
	for p := range c.Partitions {
		primaries[c.Owners[p*c.Width]]++
	}
	return maxOverMean(primaries)
}

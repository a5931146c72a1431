package ring

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
)

// Defaults. See DefaultConfig for why they were chosen.
const (
	DefaultPartitionCount    = 4099
	DefaultReplicationFactor = 1
	DefaultLoad              = 1.15
	DefaultVirtualNodes      = 300
	DefaultHasher            = HasherXXHash64
)

// Limits enforced by Validate. They bound the work and memory of New (its owner table holds
// PartitionCount × min(ReplicationFactor, members) entries), not the library.
const (
	MaxPartitionCount    = 1 << 16
	MaxReplicationFactor = 64
	MaxVirtualNodes      = 1024
)

// placementVersion names the placement algorithm (the ring library's bounded-load assignment plus this
// package's key hash, virtual node names and replica walk). It is part of Fingerprint: bump it whenever
// the same Config and members could place a key differently.
const placementVersion = "kvring-ring-v1"

// Config holds the cluster-wide ring settings. Every node of a cluster must use the same settings (compare
// Fingerprint); there are no implicit defaults: start from DefaultConfig and change what you need.
type Config struct {
	// PartitionCount is the number of partitions keys are hashed into; partitions, not keys, are assigned to
	// members. More partitions give a finer spread and fewer excess moves on a membership change. It must be
	// at least the member count. Default 4099 (prime; any value works since keys are hashed with 64 bits).
	PartitionCount int
	// ReplicationFactor is the most owners any namespace may ask for: Owners never returns more. It does not
	// change who the first k owners of a partition are, for any k. Default 1.
	ReplicationFactor int
	// Load is the bounded-load factor: no member is primary for more than ceil(floor(P/M)·Load) partitions
	// (P partitions, M members). It must be > 1. Lower values balance better but make more members hit the
	// bound and spill partitions onto their neighbours. Default 1.15.
	Load float64
	// VirtualNodes is how many points each member gets on the hash circle. More points even out the share of
	// each member and of each joining member, at the cost of a slower New. It must be at least 2. Default 300.
	VirtualNodes int
	// Hasher names the hash function for keys, partitions and virtual nodes. Only "xxhash64" (the default)
	// exists for now.
	Hasher string
}

// DefaultConfig returns the default settings: 4099 partitions, replication factor 1, load 1.15, 300 virtual
// nodes, xxhash64.
//
// Why: the goal is that one member joining N (or leaving N+1) moves at most 1.2× the ideal share 1/(N+1) of
// keys. The ring library's own defaults (271 partitions, 20 virtual nodes, load 1.25) move up to ~1.8×: a
// member's share of the circle varies by ~1/sqrt(20) ≈ 22%, the joining member takes up to 1.25× its share,
// members above the bound spill partitions that move again on every change, and 271 partitions are coarse
// for 10 members. The excess of a join is the joining member's share plus such spills. Load 1.15 caps the
// share outright; 300 virtual nodes (share spread ~6%) keep few members at the cap, so spills stay rare;
// 4099 partitions make a partition ~0.25% of keys. Over 1,600 random sets of member IDs the worst join for
// N = 3..10 moved 1.18× the ideal (load 1.25 with 200-400 virtual nodes: up to 1.25×). The price is New:
// the library re-sorts every virtual node after adding each member, O(M²·V·log(M·V)): ~5 ms for 10
// members, ~260 ms for 100 (BenchmarkNew).
func DefaultConfig() Config {
	return Config{
		PartitionCount:    DefaultPartitionCount,
		ReplicationFactor: DefaultReplicationFactor,
		Load:              DefaultLoad,
		VirtualNodes:      DefaultVirtualNodes,
		Hasher:            DefaultHasher,
	}
}

// Validate reports the first setting that is out of range, wrapping ErrInvalidConfig. A Config that passes
// Validate never makes the ring library panic; member-count limits (see MaxMembers) are checked by New.
func (c Config) Validate() error {
	switch {
	case c.PartitionCount <= 0 || c.PartitionCount > MaxPartitionCount:
		// 0 would silently become the library's default (271); a negative count turns into a huge uint64.
		return fmt.Errorf("partition count %d not in [1, %d]: %w", c.PartitionCount, MaxPartitionCount, ErrInvalidConfig)
	case c.ReplicationFactor <= 0 || c.ReplicationFactor > MaxReplicationFactor:
		return fmt.Errorf("replication factor %d not in [1, %d]: %w", c.ReplicationFactor, MaxReplicationFactor, ErrInvalidConfig)
	case math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load <= 1:
		// Load <= 1 panics in the library whenever members do not divide partitions evenly; NaN always
		// panics; +Inf disables the bound.
		return fmt.Errorf("load %v must be a finite number > 1: %w", c.Load, ErrInvalidConfig)
	case c.VirtualNodes < 2 || c.VirtualNodes > MaxVirtualNodes:
		// The library's search for a member with room skips one point of the circle; with a single point
		// per member it skips a whole member and panics (always for one member, often for two).
		return fmt.Errorf("virtual nodes %d not in [2, %d]: %w", c.VirtualNodes, MaxVirtualNodes, ErrInvalidConfig)
	case c.Hasher != HasherXXHash64:
		return fmt.Errorf("unknown hasher %q (want %q): %w", c.Hasher, HasherXXHash64, ErrInvalidConfig)
	}
	return nil
}

// MaxMembers is the largest member count New accepts with this Config: the library panics when
// M × ceil(floor(P/M) × Load) < P, which for Load > 1 means exactly M > P. It returns 0 for an invalid Config.
func (c Config) MaxMembers() int {
	if c.Validate() != nil {
		return 0
	}
	return c.PartitionCount
}

// fits reports whether m members can take all partitions within the library's load bound. It repeats the
// library's arithmetic (averageLoad) exactly, so it stays right even if Validate is relaxed later.
func (c Config) fits(m int) bool {
	if m <= 0 {
		return true
	}
	return float64(m)*c.maxLoad(m) >= float64(c.PartitionCount)
}

// maxLoad is the library's per-member bound on primary partitions for m members.
func (c Config) maxLoad(m int) float64 {
	if m <= 0 {
		return 0
	}
	return math.Ceil(float64(uint64(c.PartitionCount)/uint64(m)) * c.Load)
}

// Fingerprint is a short, stable hex string over every setting and the placement algorithm version. Two
// Configs with the same Fingerprint place every key identically for the same members; nodes refuse peers whose
// fingerprint differs.
func (c Config) Fingerprint() string {
	s := placementVersion +
		" partitions=" + strconv.Itoa(c.PartitionCount) +
		" replication=" + strconv.Itoa(c.ReplicationFactor) +
		" load=" + strconv.FormatFloat(c.Load, 'g', -1, 64) +
		" vnodes=" + strconv.Itoa(c.VirtualNodes) +
		" hasher=" + c.Hasher
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

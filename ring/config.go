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
	DefaultPartitionCount    = 65521
	DefaultReplicationFactor = 1
	DefaultLoad              = 1.15
	DefaultVirtualNodes      = 256
	DefaultHasher            = HasherXXHash64
)

// Limits enforced by Validate. They bound the work and memory of New: its owner table holds
// PartitionCount × min(ReplicationFactor, members) entries, its circle members × VirtualNodes points.
const (
	MaxPartitionCount    = 1 << 16
	MaxReplicationFactor = 64
	MaxVirtualNodes      = 1024
)

// Placement versions: which placement algorithm a Config asks for (Config.Placement). Nodes agree on one
// (node/membership: the highest every member supports), so a new algorithm can ship beside the old one and a
// cluster switches only once every member has it.
const (
	// PlacementV2 is this package's algorithm: its key hash, virtual node points seeded by each member's ID,
	// evenly spaced partitions, bounded-load sweep and replica walk (v1 was github.com/buraksezer/consistent's
	// assignment, before versions were negotiated). The default, and the only version a release advertises.
	PlacementV2 = 2
	// PlacementV3 rehearses a placement change before a real one needs it: version 2 with each member's points
	// seeded by a labelled ID, so that most partitions change owners. No release advertises it; tests do, to
	// exercise a cluster's switch from one version to the next.
	PlacementV3 = 3
	// MinPlacement and MaxPlacement bound the versions New can build.
	MinPlacement = PlacementV2
	MaxPlacement = PlacementV3
)

// Config holds the cluster-wide ring settings. Every node of a cluster must use the same settings (compare
// Fingerprint); there are no implicit defaults: start from DefaultConfig and change what you need.
type Config struct {
	// PartitionCount is the number of partitions keys are hashed into; partitions, not keys, are assigned to
	// members. More partitions give a finer spread and fewer excess moves on a membership change. It must be
	// at least the member count. Default 65521 (any value works: keys are hashed with 64 bits).
	PartitionCount int
	// ReplicationFactor is the most owners any namespace may ask for: Owners never returns more. It does not
	// change who the first k owners of a partition are, for any k. Default 1.
	ReplicationFactor int
	// Load is the bounded-load factor: no member is primary for more than max(ceil(P/M), floor(P·Load/M))
	// partitions (P partitions, M members), so with enough partitions per member the busiest holds at most
	// Load × the mean. It must be > 1. Lower values balance better but make more members hit the bound and
	// spill partitions onto their neighbours, which moves more on every membership change. Default 1.15.
	Load float64
	// VirtualNodes is how many points each member gets on the hash circle. More points even out the share of
	// each member and of each joining member (it varies by about 1/sqrt(VirtualNodes)), so fewer members hit
	// the Load bound; New's work grows with members × VirtualNodes. It must be at least 2. Default 256.
	VirtualNodes int
	// Hasher names the hash function for keys and for the seeds of members' points. Only "xxhash64" (the default)
	// exists for now.
	Hasher string
	// Placement is the placement algorithm's version (PlacementV2, PlacementV3). Unlike the settings above it is
	// not an operator's choice: the node sets the version its cluster agreed on. Default PlacementV2; 0 means
	// PlacementV2 too (settings from before versions were named).
	Placement int
}

// DefaultConfig returns the default settings: 65521 partitions, replication factor 1, load 1.15, 256 virtual
// nodes, xxhash64.
//
// Why: the goals are that one member joining N (or leaving N+1) moves at most 1.2× the ideal share 1/(N+1)
// of partitions, and that the busiest member is primary for at most 1.15× the mean, up to 256 members.
// Load 1.15 caps the share outright. The cap spills partitions to the next members, and a spill that
// changes with the membership moves partitions beyond the ideal, so members must rarely reach the cap: 256
// virtual nodes keep a member's share within about 6 % of the mean (one standard deviation, 1/sqrt(256)),
// and 65521 evenly spaced partitions (256 per member at 256 members) add almost nothing to that. Measured
// over 10 joiners and 10 leavers each (TestJoinAndLeaveMoveLittle, docs/placement.md): at 8 to 256 members
// joins and leaves move 0.98–1.04× the ideal on average and at most 1.16×; the busiest member holds
// 1.08–1.15× the mean. Placement v1 (the ring library, 4099 partitions) moved 1.22× at 64 members and 8× at
// 256 (16 partitions a member: the cap decided almost everything). New costs about 1 ms of CPU at 64
// members and 3 ms at 256 (BenchmarkNew); the owner table is 4 bytes × 65521 × min(ReplicationFactor,
// members).
func DefaultConfig() Config {
	return Config{
		PartitionCount:    DefaultPartitionCount,
		ReplicationFactor: DefaultReplicationFactor,
		Load:              DefaultLoad,
		VirtualNodes:      DefaultVirtualNodes,
		Hasher:            DefaultHasher,
		Placement:         PlacementV2,
	}
}

// Validate reports the first setting that is out of range, wrapping ErrInvalidConfig. Member-count limits (see
// MaxMembers) are checked by New.
func (c Config) Validate() error {
	switch {
	case c.PartitionCount <= 0 || c.PartitionCount > MaxPartitionCount:
		// Keys are hashed modulo the count; 0 has no partition to hash into.
		return fmt.Errorf("partition count %d not in [1, %d]: %w", c.PartitionCount, MaxPartitionCount, ErrInvalidConfig)
	case c.ReplicationFactor <= 0 || c.ReplicationFactor > MaxReplicationFactor:
		return fmt.Errorf("replication factor %d not in [1, %d]: %w", c.ReplicationFactor, MaxReplicationFactor, ErrInvalidConfig)
	case math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load <= 1:
		// Load 1 leaves no slack: nearly every member sits at the bound and every membership change
		// reshuffles the spills. NaN and +Inf disable the bound.
		return fmt.Errorf("load %v must be a finite number > 1: %w", c.Load, ErrInvalidConfig)
	case c.VirtualNodes < 2 || c.VirtualNodes > MaxVirtualNodes:
		// One point per member gives shares that vary by 100 %: the bound would decide most placements.
		return fmt.Errorf("virtual nodes %d not in [2, %d]: %w", c.VirtualNodes, MaxVirtualNodes, ErrInvalidConfig)
	case c.Hasher != HasherXXHash64:
		return fmt.Errorf("unknown hasher %q (want %q): %w", c.Hasher, HasherXXHash64, ErrInvalidConfig)
	case c.Placement != 0 && (c.Placement < MinPlacement || c.Placement > MaxPlacement):
		return fmt.Errorf("placement version %d not in [%d, %d]: %w", c.Placement, MinPlacement, MaxPlacement, ErrInvalidConfig)
	}
	return nil
}

// MaxMembers is the largest member count New accepts with this Config: one partition per member at least, so
// PartitionCount. It returns 0 for an invalid Config.
func (c Config) MaxMembers() int {
	if c.Validate() != nil {
		return 0
	}
	return c.PartitionCount
}

// fits reports whether m members can share the partitions: at most one member per partition.
func (c Config) fits(m int) bool { return m <= c.PartitionCount }

// maxLoad is the most partitions one of m members may be primary for: max(ceil(P/m), floor(P·Load/m)), at
// most P; 0 for m <= 0. m × maxLoad >= P, so every partition finds a member with room.
func (c Config) maxLoad(m int) int {
	if m <= 0 {
		return 0
	}
	p := c.PartitionCount
	even := (p + m - 1) / m
	bound := float64(p) * c.Load / float64(m)
	if !(bound < float64(p)) { // also NaN: Validate rules it out, but a bound of P is always safe
		return p
	}
	return max(even, int(math.Floor(bound)))
}

// PlacementVersion is the placement algorithm's version: Placement, with 0 read as PlacementV2.
func (c Config) PlacementVersion() int {
	if c.Placement == 0 {
		return PlacementV2
	}
	return c.Placement
}

// Fingerprint is a short, stable hex string over every setting and the placement algorithm version. Two
// Configs with the same Fingerprint place every key identically for the same members; a client compares it to
// tell whether it can route by a node's ring. For PlacementV2 it is the fingerprint builds before v0.4.0
// gossiped and compared.
func (c Config) Fingerprint() string {
	return shortHash("kvring-ring-v" + strconv.Itoa(c.PlacementVersion()) + c.settings())
}

// SettingsFingerprint is a short, stable hex string over the operator's settings alone (partitions,
// replication factor, load, virtual nodes, hasher), not the placement version: nodes refuse peers whose
// settings fingerprint differs, and agree on a placement version separately.
func (c Config) SettingsFingerprint() string {
	return shortHash("kvring-ring-settings" + c.settings())
}

func (c Config) settings() string {
	return " partitions=" + strconv.Itoa(c.PartitionCount) +
		" replication=" + strconv.Itoa(c.ReplicationFactor) +
		" load=" + strconv.FormatFloat(c.Load, 'g', -1, 64) +
		" vnodes=" + strconv.Itoa(c.VirtualNodes) +
		" hasher=" + c.Hasher
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

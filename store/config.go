package store

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Store. The zero value of every field but DataDir means
// "use the default" documented on the field; DefaultConfig and Validate fill
// them in.
type Config struct {
	// DataDir holds the bbolt catalog (catalog.db). Required.
	DataDir string
	// ShmDir is where segment files are created. Default "/dev/shm". A
	// directory on a disk works too (tests use one), at disk speed.
	ShmDir string
	// MemoryLimit is the hard budget for slot bytes (payload plus allocator
	// waste) of staged and sealed chunks. Default 1 GiB; must be positive.
	MemoryLimit int64
	// AllowShmOvercommit lets Open proceed when the filesystem of ShmDir is
	// smaller than MemoryLimit. By default Open refuses that with ErrInvalid
	// naming both sizes, since the limit could never be reached; with it set
	// Open logs a warning, and writes beyond the filesystem's space are
	// refused with ErrNoSpace. (Free space below the limit, with the
	// filesystem large enough, is only a warning either way: other processes
	// may free it.)
	AllowShmOvercommit bool
	// MaxChunkSize is the largest chunk accepted. Default
	// DefaultMaxChunkSize, or MemoryLimit when that is smaller (set by
	// Validate, so it follows a MemoryLimit set after DefaultConfig). It must not exceed MemoryLimit and
	// must be below 2 GiB.
	MaxChunkSize int64
	// SegmentSize is the preferred length of a segment file; a segment holds
	// max(1, min(SegmentSize, MemoryLimit)/slot) slots, at most 2^20.
	// Default 64 MiB. Segments are sparse: only slots in use occupy memory.
	SegmentSize int64
	// StageLease is how long, on the Now clock, a staged slot may wait for its
	// Seal or Abort after Stage: the first ExpireNow after that frees it, and
	// its Write and Seal then fail with ErrLeaseExpired (a writer filling the
	// slot through Staged.Bytes keeps the pages until its Seal or Abort).
	// Default 30 s.
	StageLease time.Duration
	// MaxPinLease caps the pin lease Has takes. Default 5 min.
	MaxPinLease time.Duration
	// MaxPinHold bounds how long one client (HasFor) keeps one chunk
	// pinned without a break, however often it renews its leases: past it,
	// its new leases answer the chunk held but do not pin it, until its
	// earlier leases on it end. Default 2×MaxPinLease; negative: no bound.
	MaxPinHold time.Duration
	// MaxPinnedBytes caps the slot bytes that pin leases hold at once, over
	// all callers: a Has whose pins would go beyond it is refused with
	// ErrPinLimit and pins nothing, so pins can never freeze the whole
	// budget. Zero means MemoryLimit/2, worked out by Validate (so a Config from
	// DefaultConfig follows a MemoryLimit set later); must not be negative or
	// exceed MemoryLimit.
	MaxPinnedBytes int64
	// MaxStagedBytes caps the payload bytes of writes in progress (staged,
	// not yet sealed or ended) at once: a Stage beyond it is refused with
	// ErrNoSpace, so reservations that are not receiving bytes can never
	// push out more than that share of the sealed chunks. Zero means
	// MemoryLimit/2, worked out by Validate; must not be negative or exceed
	// MemoryLimit.
	MaxStagedBytes int64
	// Policy names the eviction policy: PolicyLRU (default) or
	// PolicyTinyLFU (ristretto).
	Policy string
	// ExpectedChunkSize sizes PolicyTinyLFU's frequency sketch
	// (MemoryLimit/ExpectedChunkSize items, sketchCountersPerItem counters
	// each, at least 1024 counters). Default 256 KiB.
	ExpectedChunkSize int64
	// MaintenanceInterval is how often (±10 % jitter) the background loop
	// calls ExpireNow; the same loop flushes the catalog within 10 ms of a
	// change. Default 1 s. Negative: no background loop (tests call ExpireNow
	// and FlushCatalog themselves; Close still flushes).
	MaintenanceInterval time.Duration
	// ChecksumParts is how many goroutines share the checksum pass over a
	// large blob (Blob.Checksum, Blob.StageChunk: a local socket's
	// publish): the bytes are split into up to that many parts of at least
	// 256 KiB, checksummed at once and combined. It can only help when a
	// core is free and the bytes are in a cache (from memory one core
	// already reads about as fast as the bus allows); on the 2-vCPU
	// reference host it did not reliably (BenchmarkBlobChecksumParts). Default 1:
	// one pass on the caller's goroutine. Must not be negative.
	ChecksumParts int
	// Lower is a tier under the shared memory (store/disk) that keeps what
	// the policy evicts and answers for what the index lacks (lower.go).
	// Default nil: none. The caller opens it before Open and closes it
	// after Close.
	Lower Lower
	// Companions names, by a chunk's name (SetName), the chunks of its
	// namespace that the policy evicts with it: a Redis-protocol value's
	// metadata with its kv_bytes, so that no metadata outlives the bytes it
	// describes. Only chunks in shared memory are evicted with it (one the
	// Lower tier takes stays). Default nil: none. It must not block or call
	// the store.
	Companions func(name string) []ID
	// Now is the clock of stage and pin leases; ExpireNow reads it. Default
	// time.Now.
	Now func() time.Time
	// Logger receives start-up, recovery and error logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultMaxChunkSize is MaxChunkSize's default, 128 MiB: the KV tensors of
// 256 tokens (LMCache's chunk) of a 405B-class model (126 MiB: 126 layers ×
// 8 KV heads × 128 × 2 × 256 × 2 bytes); a 70B-class model's are 80 MiB.
const DefaultMaxChunkSize = 128 << 20

// DefaultConfig returns a Config with every default filled in, for dataDir.
func DefaultConfig(dataDir string) Config {
	c := Config{DataDir: dataDir}
	c.setDefaults()
	return c
}

// Validate fills in the default of every zero field, as DefaultConfig does,
// then reports every setting that cannot work: the error joins one error per
// bad field (errors.Join), each wrapping ErrInvalid and naming the field; nil
// when the configuration is usable. Open calls it on its own copy; callers
// call it to check a configuration before Open. It modifies c, so it is not
// safe for concurrent use with other uses of c; it never blocks.
func (c *Config) Validate() error {
	c.setDefaults()
	// The defaults that follow MemoryLimit: set here, not by setDefaults,
	// so that a Config from DefaultConfig follows a MemoryLimit set later.
	if c.MaxChunkSize == 0 {
		c.MaxChunkSize = min(DefaultMaxChunkSize, c.MemoryLimit)
	}
	if c.MaxPinnedBytes == 0 {
		c.MaxPinnedBytes = c.MemoryLimit / 2
	}
	if c.MaxStagedBytes == 0 {
		c.MaxStagedBytes = c.MemoryLimit / 2
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if c.DataDir == "" {
		bad("DataDir is required")
	}
	if c.MemoryLimit <= 0 {
		bad("MemoryLimit must be positive, got %d", c.MemoryLimit)
	}
	switch {
	case c.MaxChunkSize <= 0:
		bad("MaxChunkSize must be positive, got %d", c.MaxChunkSize)
	case c.MemoryLimit > 0 && c.MaxChunkSize > c.MemoryLimit:
		bad("MaxChunkSize must not exceed MemoryLimit=%d, got %d", c.MemoryLimit, c.MaxChunkSize)
	}
	if c.MaxChunkSize > 1<<31-1 {
		bad("MaxChunkSize must be below 2 GiB, got %d", c.MaxChunkSize)
	}
	if c.SegmentSize <= 0 {
		bad("SegmentSize must be positive, got %d", c.SegmentSize)
	}
	if c.StageLease < 0 {
		bad("StageLease must not be negative, got %v", c.StageLease)
	}
	if c.MaxPinLease < 0 {
		bad("MaxPinLease must not be negative, got %v", c.MaxPinLease)
	}
	switch {
	case c.MaxStagedBytes < 0:
		bad("MaxStagedBytes must not be negative, got %d", c.MaxStagedBytes)
	case c.MemoryLimit > 0 && c.MaxStagedBytes > c.MemoryLimit:
		bad("MaxStagedBytes must not exceed MemoryLimit=%d, got %d", c.MemoryLimit, c.MaxStagedBytes)
	case c.MaxPinnedBytes < 0:
		bad("MaxPinnedBytes must not be negative, got %d", c.MaxPinnedBytes)
	case c.MemoryLimit > 0 && c.MaxPinnedBytes > c.MemoryLimit:
		bad("MaxPinnedBytes must not exceed MemoryLimit=%d, got %d", c.MemoryLimit, c.MaxPinnedBytes)
	}
	if c.Policy != PolicyLRU && c.Policy != PolicyTinyLFU {
		bad("Policy: eviction policy must be %q or %q, got %q", PolicyLRU, PolicyTinyLFU, c.Policy)
	}
	if c.ChecksumParts < 0 {
		bad("ChecksumParts must not be negative, got %d", c.ChecksumParts)
	}
	if c.ExpectedChunkSize <= 0 {
		bad("ExpectedChunkSize must be positive, got %d", c.ExpectedChunkSize)
	}
	return errors.Join(errs...)
}

// setDefaults fills in the default of every zero field.
func (c *Config) setDefaults() {
	if c.ShmDir == "" {
		c.ShmDir = "/dev/shm"
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = 1 << 30
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = 64 << 20
	}
	if c.StageLease == 0 {
		c.StageLease = 30 * time.Second
	}
	if c.MaxPinLease == 0 {
		c.MaxPinLease = 5 * time.Minute
	}
	if c.MaxPinHold == 0 {
		c.MaxPinHold = 2 * c.MaxPinLease
	}
	if c.Policy == "" {
		c.Policy = PolicyLRU
	}
	if c.ExpectedChunkSize == 0 {
		c.ExpectedChunkSize = 256 << 10
	}
	if c.ChecksumParts == 0 {
		c.ChecksumParts = 1
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

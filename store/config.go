package store

import (
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Store. The zero value of every field but DataDir means
// "use the default" documented on the field; DefaultConfig fills them in.
type Config struct {
	// DataDir holds the bbolt catalog (catalog.db). Required.
	DataDir string
	// ShmDir is where segment files are created. Default "/dev/shm". A
	// directory on a disk works too (tests use one), at disk speed.
	ShmDir string
	// MemoryLimit is the hard budget for slot bytes (payload plus allocator
	// waste) of staged and sealed chunks. Default 1 GiB.
	MemoryLimit int64
	// MaxChunkSize is the largest chunk accepted. Default 64 MiB. It must not
	// exceed MemoryLimit.
	MaxChunkSize int64
	// SegmentSize is the preferred length of a segment file; a segment holds
	// max(1, SegmentSize/slot) slots. Default 64 MiB. Segments are sparse:
	// only slots in use occupy memory.
	SegmentSize int64
	// StageLease is how long a staged slot waits for its seal. Default 30 s.
	StageLease time.Duration
	// MaxPinLease caps the pin lease Has takes. Default 5 min.
	MaxPinLease time.Duration
	// Policy names the eviction policy: PolicyLRU (default) or
	// PolicyTinyLFU (ristretto).
	Policy string
	// ExpectedChunkSize sizes PolicyTinyLFU's frequency sketch
	// (MemoryLimit/ExpectedChunkSize items, sketchCountersPerItem counters
	// each). Default 256 KiB.
	ExpectedChunkSize int64
	// MaintenanceInterval is how often the background loop expires leases and
	// flushes the catalog. Default 1 s. Negative: no background loop (tests
	// call ExpireNow and FlushCatalog themselves).
	MaintenanceInterval time.Duration
	// Now is the clock for leases. Default time.Now.
	Now func() time.Time
	// Logger receives start-up, recovery and error logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in, for dataDir.
func DefaultConfig(dataDir string) Config {
	c := Config{DataDir: dataDir}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.ShmDir == "" {
		c.ShmDir = "/dev/shm"
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = 1 << 30
	}
	if c.MaxChunkSize == 0 {
		c.MaxChunkSize = min(64<<20, c.MemoryLimit)
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
	if c.Policy == "" {
		c.Policy = PolicyLRU
	}
	if c.ExpectedChunkSize == 0 {
		c.ExpectedChunkSize = 256 << 10
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

// validate reports the first setting that cannot work.
func (c *Config) validate() error {
	switch {
	case c.DataDir == "":
		return fmt.Errorf("%w: DataDir is required", ErrInvalid)
	case c.MemoryLimit <= 0:
		return fmt.Errorf("%w: MemoryLimit must be positive, got %d", ErrInvalid, c.MemoryLimit)
	case c.MaxChunkSize <= 0 || c.MaxChunkSize > c.MemoryLimit:
		return fmt.Errorf("%w: MaxChunkSize must be in (0, MemoryLimit=%d], got %d", ErrInvalid, c.MemoryLimit, c.MaxChunkSize)
	case c.MaxChunkSize > 1<<31-1:
		return fmt.Errorf("%w: MaxChunkSize must be below 2 GiB, got %d", ErrInvalid, c.MaxChunkSize)
	case c.SegmentSize <= 0:
		return fmt.Errorf("%w: SegmentSize must be positive, got %d", ErrInvalid, c.SegmentSize)
	case c.StageLease < 0 || c.MaxPinLease < 0:
		return fmt.Errorf("%w: leases must not be negative", ErrInvalid)
	case c.Policy != PolicyLRU && c.Policy != PolicyTinyLFU:
		return fmt.Errorf("%w: Policy must be %q or %q, got %q", ErrInvalid, PolicyLRU, PolicyTinyLFU, c.Policy)
	case c.ExpectedChunkSize <= 0:
		return fmt.Errorf("%w: ExpectedChunkSize must be positive, got %d", ErrInvalid, c.ExpectedChunkSize)
	}
	return nil
}

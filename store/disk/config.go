package disk

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Direct I/O modes, the values of Config.DirectIO.
const (
	// DirectAuto opens region files with O_DIRECT and falls back to
	// buffered I/O, with one warning, on a filesystem that refuses it
	// (tmpfs, some overlay filesystems). The default.
	DirectAuto = "auto"
	// DirectOn requires O_DIRECT: Open fails where the filesystem refuses it.
	DirectOn = "on"
	// DirectOff uses buffered I/O (the page cache then holds a second copy
	// of what is read and written).
	DirectOff = "off"
)

// Config configures a Tier. The zero value of every field but Dir and Limit
// means "use the default" documented on the field.
type Config struct {
	// Dir holds the region files (region-<seq>.kvr) and a LOCK file. It is
	// created when missing. Required.
	Dir string
	// Limit is the most bytes the region files may take on the filesystem
	// (whole regions: RegionSize each). Required; at least 4 regions.
	Limit int64
	// RegionSize is the length of a region file: the unit of sequential
	// writes and of eviction. Default 64 MiB, or Limit/4 when that is
	// smaller; a multiple of 4 KiB, at least 1 MiB. A chunk larger than a
	// region (less its header, trailer and footer) is not offloaded.
	RegionSize int64
	// QueueBytes bounds the chunk bytes waiting for the writer (copied out
	// of shared memory, not yet on disk). An offload that would exceed it
	// is dropped and counted: a slow disk never slows the caller. Default
	// 64 MiB.
	QueueBytes int64
	// ReadBufferBytes bounds the aligned read buffers kept for reuse after
	// a read released them. Default 64 MiB.
	ReadBufferBytes int64
	// DirectIO is DirectAuto (default), DirectOn or DirectOff.
	DirectIO string
	// HotWindow is how many distinct chunks read from disk the tier
	// remembers to call a second read of one "hot" (Chunk.Hot): about the
	// last HotWindow to 2*HotWindow reads. Default 4096 (16 bytes each).
	HotWindow int
	// WriteDelay is how long the writer, woken by an offload into an empty
	// queue, waits for more (until GatherBytes are queued) before it
	// writes: the disk gets large writes and the node a few system calls
	// and I/O interrupts per many chunks rather than per chunk, which
	// costs the shared-memory path less. A chunk is held from its
	// offload on (served from the queue), so the delay costs no hit.
	// Default 20 ms (DefaultWriteDelay); negative: write at once.
	WriteDelay time.Duration
	// RetryAfter is how long the tier waits, after a write failed (a full
	// disk, an I/O error, its directory gone), before it tries to offload
	// again. Meanwhile offloads are dropped and counted. Default 30 s
	// (DefaultRetryAfter).
	RetryAfter time.Duration
	// Now is the clock of pins and retries. Default time.Now.
	Now func() time.Time
	// Logger receives recovery, degradation and error lines. Default
	// slog.Default().
	Logger *slog.Logger

	// formatVersion is the region format the tier writes: 0 is the
	// current (version); tests set 1 to write what earlier releases did.
	formatVersion uint32
}

// version is the region format version the tier writes.
func (c *Config) version() uint32 {
	if c.formatVersion != 0 {
		return c.formatVersion
	}
	return version
}

// DefaultRetryAfter is Config.RetryAfter's default.
const DefaultRetryAfter = 30 * time.Second

// DefaultWriteDelay is Config.WriteDelay's default.
const DefaultWriteDelay = 20 * time.Millisecond

// gatherBytes is how many queued bytes end the writer's WriteDelay early
// (at most a quarter of QueueBytes, so that offloads are not dropped
// while it waits).
func (c *Config) gatherBytes() int64 { return min(4<<20, c.QueueBytes/4) }

// ErrInvalid reports a Config that cannot work; the message names the field.
var ErrInvalid = errors.New("disk: invalid configuration")

// Validate fills in the defaults and reports every field that cannot work
// (joined errors, each wrapping ErrInvalid). It never blocks.
func (c *Config) Validate() error {
	c.setDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if c.Dir == "" {
		bad("Dir is required")
	}
	if c.RegionSize < 1<<20 || c.RegionSize%blockSize != 0 {
		bad("RegionSize must be a multiple of 4096 of at least 1 MiB, got %d", c.RegionSize)
	}
	if c.Limit < 4*c.RegionSize {
		bad("Limit must hold at least 4 regions of RegionSize=%d, got %d", c.RegionSize, c.Limit)
	}
	if c.QueueBytes <= 0 {
		bad("QueueBytes must be positive, got %d", c.QueueBytes)
	}
	if c.ReadBufferBytes < 0 {
		bad("ReadBufferBytes must not be negative, got %d", c.ReadBufferBytes)
	}
	if c.DirectIO != DirectAuto && c.DirectIO != DirectOn && c.DirectIO != DirectOff {
		bad("DirectIO must be %q, %q or %q, got %q", DirectAuto, DirectOn, DirectOff, c.DirectIO)
	}
	if c.HotWindow < 0 {
		bad("HotWindow must not be negative, got %d", c.HotWindow)
	}
	if c.RetryAfter < 0 {
		bad("RetryAfter must not be negative, got %v", c.RetryAfter)
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.RegionSize == 0 {
		c.RegionSize = 64 << 20
		if q := c.Limit / 4 &^ (blockSize - 1); c.Limit > 0 && q < c.RegionSize && q >= 1<<20 {
			c.RegionSize = q
		}
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = 64 << 20
	}
	if c.ReadBufferBytes == 0 {
		c.ReadBufferBytes = 64 << 20
	}
	if c.DirectIO == "" {
		c.DirectIO = DirectAuto
	}
	if c.HotWindow == 0 {
		c.HotWindow = 4096
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.WriteDelay == 0 {
		c.WriteDelay = DefaultWriteDelay
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kvring/kvring/store/disk"
)

// registerServeDisk adds the --disk-* flags, bound to c's fields: the disk
// tier under the shared memory (store/disk), off while --disk-dir is empty.
// Zero sizes take disk.Config's defaults when the tier opens.
func registerServeDisk(fs *pflag.FlagSet, c *disk.Config) {
	if c.DirectIO == "" {
		c.DirectIO = disk.DirectAuto
	}
	fs.StringVar(&c.Dir, "disk-dir", c.Dir, `directory of the disk tier: chunks evicted from shared memory are kept there and still served; "" (default) turns it off`)
	sizeVar(fs, &c.Limit, "disk-limit", "most bytes the disk tier's region files take (required with --disk-dir; at least 4 regions)")
	sizeVar(fs, &c.RegionSize, "disk-region-size", "size of one disk region file, the unit of writes and eviction (default 64MiB, or a quarter of --disk-limit when smaller)")
	sizeVar(fs, &c.QueueBytes, "disk-queue", "most evicted bytes waiting to be written; beyond it offloads are dropped, counted (default 64MiB)")
	if c.RetryAfter == 0 {
		c.RetryAfter = disk.DefaultRetryAfter
	}
	fs.DurationVar(&c.RetryAfter, "disk-retry-after", c.RetryAfter, "after a disk write failed (full disk, I/O error, directory gone), how long the tier drops offloads before it tries again")
	fs.StringVar(&c.DirectIO, "disk-direct-io", c.DirectIO, `O_DIRECT for region files: "auto" (fall back to buffered I/O where the filesystem refuses it), "on" or "off"`)
}

// checkDiskFlags refuses a --disk-dir without --disk-limit, naming both.
func checkDiskFlags(c disk.Config) error {
	if c.Dir != "" && c.Limit <= 0 {
		return fmt.Errorf("--disk-limit is required with --disk-dir (the most bytes the disk tier may take in %s)", c.Dir)
	}
	return nil
}

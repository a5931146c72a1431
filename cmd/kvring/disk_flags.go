package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kvring/kvring/store/disk"
)

// diskFlags are serve's --disk-* flags: the disk tier under the shared
// memory (store/disk), off while --disk-dir is empty.
type diskFlags struct {
	dir      string
	limit    byteSize
	region   byteSize
	queue    byteSize
	directIO string
}

func registerServeDisk(fs *pflag.FlagSet, f *diskFlags) {
	f.directIO = disk.DirectAuto
	fs.StringVar(&f.dir, "disk-dir", "", `directory of the disk tier: chunks evicted from shared memory are kept there and still served; "" (default) turns it off`)
	fs.Var(&f.limit, "disk-limit", "most bytes the disk tier's region files take (required with --disk-dir; at least 4 regions)")
	fs.Var(&f.region, "disk-region-size", "size of one disk region file, the unit of writes and eviction (default 64MiB, or a quarter of --disk-limit when smaller)")
	fs.Var(&f.queue, "disk-queue", "most evicted bytes waiting to be written; beyond it offloads are dropped, counted (default 64MiB)")
	fs.StringVar(&f.directIO, "disk-direct-io", f.directIO, `O_DIRECT for region files: "auto" (fall back to buffered I/O where the filesystem refuses it), "on" or "off"`)
}

// config is the disk tier's configuration the flags give (Dir "" = off);
// the node fills in its logger and clock and disk.Open its defaults. A
// --disk-dir without --disk-limit is an error naming both.
func (f *diskFlags) config() (disk.Config, error) {
	if f.dir != "" && f.limit <= 0 {
		return disk.Config{}, fmt.Errorf("--disk-limit is required with --disk-dir (the most bytes the disk tier may take in %s)", f.dir)
	}
	return disk.Config{Dir: f.dir, Limit: int64(f.limit), RegionSize: int64(f.region), QueueBytes: int64(f.queue),
		DirectIO: f.directIO}, nil
}

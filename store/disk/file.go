package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// regionName is the file name of region seq.
func regionName(seq uint32) string { return fmt.Sprintf("region-%08x.kvr", seq) }

// parseRegionName returns the seq a region file name carries.
func parseRegionName(name string) (uint32, bool) {
	hex, ok := strings.CutPrefix(name, "region-")
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, ".kvr")
	if !ok || len(hex) != 8 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	return uint32(v), err == nil
}

// faults lets tests fail I/O of the tier on purpose. The zero value fails
// nothing. Set only before the calls it should affect.
type faults struct {
	write func(path string) error // before each pwrite of a region
	read  func(path string) error // before each pread of a region
}

// openFile opens path with flags, adding O_DIRECT when direct is set.
func openFile(path string, flags int, direct bool) (int, error) {
	if direct {
		flags |= unix.O_DIRECT
	}
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// probeDirect reports whether the filesystem of dir accepts O_DIRECT.
func probeDirect(dir string) bool {
	p := filepath.Join(dir, ".direct-probe")
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o640)
	if err != nil {
		_ = os.Remove(p)
		return false
	}
	buf := alignedBuf(blockSize)
	_, werr := unix.Pwrite(fd, buf, 0)
	_ = unix.Close(fd)
	_ = os.Remove(p)
	return werr == nil
}

// preadvFull fills bufs, back to back, from off; a short read (the file
// was truncated) is io.ErrUnexpectedEOF. It modifies bufs.
func preadvFull(fd int, bufs [][]byte, off int64) error {
	for len(bufs) > 0 {
		n, err := unix.Preadv(fd, bufs, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		off += int64(n)
		bufs = advance(bufs, n)
	}
	return nil
}

// advance drops the first n bytes of bufs, in a copy of the slice when
// it must shorten one of them (the caller's slices stay as they were).
func advance(bufs [][]byte, n int) [][]byte {
	for n > 0 {
		if n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
			continue
		}
		bufs = slices.Clone(bufs)
		bufs[0] = bufs[0][n:]
		n = 0
	}
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}

// pwritevFull writes bufs back to back at off.
func pwritevFull(fd int, bufs [][]byte, off int64) error {
	for len(bufs) > 0 {
		n, err := unix.Pwritev2(fd, bufs, off, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		bufs = advance(bufs, n)
	}
	return nil
}

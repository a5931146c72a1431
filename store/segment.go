package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageSize is the granule of hole punching and of segment file sizes.
const pageSize = 4096

// segmentGuard is the slack kept after the last slot of a segment file: the
// Vineyard clients map map_size±8 bytes (see docs/vineyard-protocol.md).
const segmentGuard = 8

// segment is one shared-memory file holding nslots slots of one size class.
// The store's mutex guards every field but mem, whose bytes belong to the
// entries of the slots they lie in.
type segment struct {
	id       uint32
	path     string
	file     *os.File
	mem      []byte // MAP_SHARED mapping of the whole file
	slotSize int64
	nslots   int32

	state   []uint8 // per slot: slotClean, slotDirty or slotUsed
	used    int32   // slots in state slotUsed
	clean   []int32 // candidate clean slots (may hold stale entries; state decides)
	inClean bool    // listed in its class's cleanSegs
	// lost: the file was found deleted or truncated (ErrSegmentLost). The
	// arena allocates no more slots in it and releases it once it is empty.
	lost bool
}

// segmentFileSize is the file length of a segment: its slots plus the guard,
// rounded up to a page.
func segmentFileSize(slotSize int64, nslots int32) int64 {
	return roundUp(slotSize*int64(nslots)+segmentGuard, pageSize)
}

// createSegment creates (or truncates) the file at path and maps it. The file
// is sparse: a slot's space is allocated when the slot is first handed out
// (allocate), and returned when its pages are punched.
func createSegment(id uint32, path string, slotSize int64, nslots int32) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create segment %q: %w", path, err)
	}
	size := segmentFileSize(slotSize, nslots)
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("cannot size segment %q to %d bytes: %w", path, size, err)
	}
	seg, err := mapSegment(id, path, f, slotSize, nslots, size)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	seg.clean = make([]int32, 0, nslots)
	for i := nslots - 1; i >= 0; i-- {
		seg.clean = append(seg.clean, i)
	}
	return seg, nil
}

// openSegment maps an existing segment file after a restart. It fails when
// the file is missing or shorter than the catalog says.
func openSegment(id uint32, path string, slotSize int64, nslots int32) (*segment, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open segment %q: %w", path, err)
	}
	size := segmentFileSize(slotSize, nslots)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot stat segment %q: %w", path, err)
	}
	if st.Size() != size {
		f.Close()
		return nil, fmt.Errorf("segment %q is %d bytes, catalog expects %d", path, st.Size(), size)
	}
	return mapSegment(id, path, f, slotSize, nslots, size)
}

func mapSegment(id uint32, path string, f *os.File, slotSize int64, nslots int32, size int64) (*segment, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot map segment %q (%d bytes): %w", path, size, err)
	}
	return &segment{id: id, path: path, file: f, mem: mem, slotSize: slotSize, nslots: nslots}, nil
}

// slot returns the bytes of slot i.
func (s *segment) slot(i int32) []byte {
	off := int64(i) * s.slotSize
	return s.mem[off : off+s.slotSize : off+s.slotSize]
}

// punch returns the whole pages of slot i to the kernel. The slot reads as
// zeros afterwards.
func (s *segment) punch(i int32) error {
	start := roundUp(int64(i)*s.slotSize, pageSize)
	end := (int64(i) + 1) * s.slotSize / pageSize * pageSize
	if end <= start {
		return nil
	}
	err := unix.Fallocate(int(s.file.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, start, end-start)
	if err != nil {
		return fmt.Errorf("cannot release pages of segment %q: %w", s.path, err)
	}
	return nil
}

// errFallocateUnsupported: the filesystem cannot allocate space ahead of
// writes.
var errFallocateUnsupported = errors.New("fallocate not supported")

// allocate makes the filesystem back the pages under slot i with real
// space, so that a full filesystem is an error here (wrapping ErrNoSpace)
// instead of a SIGBUS when bytes are copied into the mapping. The arena
// accounts whole slots, so the whole slot is allocated: a later chunk of
// the class reusing the slot (a dirty slot) finds its pages there. Pages
// already backed cost a lookup each. It fails with errFallocateUnsupported
// when the filesystem cannot do it. It blocks while the kernel allocates
// (and zeroes) the pages; it changes no byte of the slot.
func (s *segment) allocate(i int32) error {
	off := int64(i) * s.slotSize
	start := off / pageSize * pageSize
	end := roundUp(off+s.slotSize, pageSize)
	for {
		err := rawFallocate(int(s.file.Fd()), 0, start, end-start)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
			return fmt.Errorf("%w: cannot allocate %d bytes in segment %q: %w", ErrNoSpace, end-start, s.path, err)
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return errFallocateUnsupported
		default:
			return fmt.Errorf("cannot allocate %d bytes in segment %q: %w", end-start, s.path, err)
		}
	}
}

// checkFile reports, wrapping ErrSegmentLost, when the segment's file was
// deleted or truncated under the store; nil when it is whole. One fstat.
func (s *segment) checkFile() error {
	var st unix.Stat_t
	if err := rawFstat(int(s.file.Fd()), &st); err != nil {
		return fmt.Errorf("%w: cannot stat segment %q: %w", ErrSegmentLost, s.path, err)
	}
	if st.Nlink == 0 {
		return fmt.Errorf("%w: segment %q was deleted", ErrSegmentLost, s.path)
	}
	if want := segmentFileSize(s.slotSize, s.nslots); st.Size < want {
		return fmt.Errorf("%w: segment %q was truncated to %d bytes, %d expected", ErrSegmentLost, s.path, st.Size, want)
	}
	return nil
}

// residentBytes reports the bytes of the segment file backed by memory, as
// the kernel counts them.
func (s *segment) residentBytes() int64 {
	var st unix.Stat_t
	if err := unix.Fstat(int(s.file.Fd()), &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}

// close unmaps and closes the segment; remove also deletes the file.
func (s *segment) close(remove bool) error {
	var errs []error
	if s.mem != nil {
		if err := unix.Munmap(s.mem); err != nil {
			errs = append(errs, fmt.Errorf("cannot unmap segment %q: %w", s.path, err))
		}
		s.mem = nil
	}
	if err := s.file.Close(); err != nil {
		errs = append(errs, fmt.Errorf("cannot close segment %q: %w", s.path, err))
	}
	if remove {
		if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("cannot remove segment %q: %w", s.path, err))
		}
	}
	return errors.Join(errs...)
}

// dupFD duplicates f's descriptor (close-on-exec) into a new *os.File.
func dupFD(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// prefaultMin is the smallest write worth a prefault call: two pages. At
// 32 KiB one call already beat eight faults by 1.3-1.8x
// (BenchmarkStageSealFresh), and 32 KiB Redis-protocol SETs spent 12 % of a
// node's CPU in the faults.
const prefaultMin = 8 << 10

// prefault makes the whole pages under b (a part of a fresh slot about to be
// written) resident and writable in one madvise(MADV_POPULATE_WRITE) call,
// instead of one page fault per 4 KiB page during the copy: on a virtual
// machine each fault is a trap to the kernel that costs about as much as
// zeroing the page, and a first write to a tmpfs mapping ran at 0.3-0.7 GB/s
// against 0.9-1.1 GB/s prefaulted (Linux 6.18, 2 vCPU VM). It changes no
// bytes and allocates nothing the copy would not. Kernels before 5.14 do not
// know the advice: the first EINVAL turns prefaulting off for the store, and
// the copy faults the pages in as before. Any other error is ignored for the
// same reason: the copy then takes the faults. Prefaulting is no safeguard:
// the space under a fresh slot is allocated at Stage (segment.allocate), and
// a fault that still finds no page is caught by guardFault.
func (s *Store) prefault(b []byte) {
	if len(b) < prefaultMin || s.noPrefault.Load() {
		return
	}
	addr := int64(uintptr(unsafe.Pointer(&b[0])))
	start := roundUp(addr, pageSize) - addr
	end := (addr+int64(len(b)))/pageSize*pageSize - addr
	if start >= end {
		return
	}
	if err := rawMadvise(b[start:end], unix.MADV_POPULATE_WRITE); errors.Is(err, unix.EINVAL) {
		s.noPrefault.Store(true)
	}
}

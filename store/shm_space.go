package store

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// shmSpace reports the size and the space available to this process of
// the filesystem holding dir.
func shmSpace(dir string) (total, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("cannot stat the filesystem of %q: %w", dir, err)
	}
	unit := st.Frsize
	if unit <= 0 {
		unit = st.Bsize
	}
	return int64(st.Blocks) * unit, int64(st.Bavail) * unit, nil
}

// checkShmSize refuses (ErrInvalid) a MemoryLimit larger than the whole
// filesystem of ShmDir unless AllowShmOvercommit is set: the store could
// never hold the budget it promises. Open calls it before recovery.
func (s *Store) checkShmSize() error {
	total, _, err := shmSpace(s.cfg.ShmDir)
	if err != nil {
		return err
	}
	if total >= s.cfg.MemoryLimit {
		return nil
	}
	if !s.cfg.AllowShmOvercommit {
		return fmt.Errorf("%w: MemoryLimit is %d bytes but the filesystem of ShmDir %q holds %d bytes: enlarge it, lower the limit, or set AllowShmOvercommit (kvring serve --shm-overcommit)",
			ErrInvalid, s.cfg.MemoryLimit, s.cfg.ShmDir, total)
	}
	s.log.Warn("the shared-memory filesystem is smaller than the memory limit; writes beyond it are refused (no space)",
		"shm_dir", s.cfg.ShmDir, "filesystem_bytes", total, "limit_bytes", s.cfg.MemoryLimit)
	return nil
}

// warnShmFree logs a warning naming both sizes when the filesystem of
// ShmDir has less room than the part of the budget the store does not
// occupy yet. Other processes may free space, so it is no error; writes
// that find no space are refused with ErrNoSpace. Open calls it after
// recovery, with the store's mutex not held.
func (s *Store) warnShmFree() {
	_, avail, err := shmSpace(s.cfg.ShmDir)
	if err != nil {
		s.log.Warn("cannot check the free space of the shared-memory filesystem", "err", err)
		return
	}
	s.mu.Lock()
	resident := s.arena.residentBytes()
	s.mu.Unlock()
	if avail+resident < s.cfg.MemoryLimit {
		s.log.Warn("the shared-memory filesystem has less free space than the memory limit; writes beyond it are refused (no space)",
			"shm_dir", s.cfg.ShmDir, "free_bytes", avail, "held_bytes", resident, "limit_bytes", s.cfg.MemoryLimit)
	}
}

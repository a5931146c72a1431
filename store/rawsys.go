package store

import (
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The store's per-write system calls (fallocate and
// madvise(MADV_POPULATE_WRITE) on a fresh slot, the fstat of a segment at
// Seal, the catalog journal's append) are made with RawSyscall, not through
// the Go runtime's syscall entry. That entry involves the runtime's monitor
// thread (sysmon): a call made while every P was idle wakes it from its long
// sleep back to polling every 20 us, and a call that runs past 20 us (on
// tmpfs, fallocate and madvise of fresh pages often do) makes it hand the P
// to another thread and keep polling at 20 us. A profile of 32 KiB
// Redis-protocol SETs spent 12 % of a node's CPU in sysmon and its context
// switches. A raw call keeps the P for its duration, which costs nothing
// here: the call is CPU work in the kernel (allocating and zeroing memory
// pages, copying a few hundred bytes into the page cache), not a wait. Each
// blocks the calling goroutine for that work and no longer, except that a
// journal append to a disk the kernel is throttling writes to waits for the
// throttle with the P held.

// rawFallocate is fallocate(2) on fd, made raw.
func rawFallocate(fd int, mode uint32, off, length int64) error {
	_, _, e := unix.RawSyscall6(unix.SYS_FALLOCATE, uintptr(fd), uintptr(mode), uintptr(off), uintptr(length), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawMadvise is madvise(2) over b, made raw. b must not be empty.
func rawMadvise(b []byte, advice int) error {
	_, _, e := unix.RawSyscall(unix.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(advice))
	if e != 0 {
		return e
	}
	return nil
}

// rawWriteAll writes all of b to fd with raw write(2) calls, retrying short
// writes and EINTR.
func rawWriteAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return e
		case n == 0:
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// rawFstat is fstat(2) of fd, made raw.
func rawFstat(fd int, st *unix.Stat_t) error {
	_, _, e := unix.RawSyscall(unix.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(st)), 0)
	if e != 0 {
		return e
	}
	return nil
}

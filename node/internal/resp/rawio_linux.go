package resp

import (
	"syscall"
	"unsafe"
)

// rawRead is read(2) as a raw system call, with no scheduler hand-off: for
// a non-blocking descriptor only, where it cannot wait.
func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

// rawWritev is writev(2) as a raw system call, for a non-blocking
// descriptor only.
func rawWritev(fd uintptr, iov []syscall.Iovec) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	return int(n), errno
}

// iovec describes b, which must not be empty, for writev.
func iovec(b []byte) syscall.Iovec {
	v := syscall.Iovec{Base: &b[0]}
	v.SetLen(len(b))
	return v
}

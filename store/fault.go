package store

import (
	"fmt"
	"runtime/debug"

	"github.com/kvring/kvring/internal/crc32c"
)

// guardFault runs f, which reads or writes mapped segment memory, and turns
// a fault on that memory (SIGBUS when a page has no backing: the segment
// file was truncated, or the filesystem had no space for it) into an error
// wrapping ErrFault instead of a crash of the process. It sets the calling
// goroutine's panic-on-fault mode for the duration of f and restores the
// previous mode; any other panic passes through unchanged. f must not
// start goroutines that touch the mapping (their faults are not caught)
// and must leave no lock held if it stops half-way. It blocks as long as f.
func guardFault(f func()) (err error) {
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		r := recover()
		if r == nil {
			return
		}
		if fe, ok := r.(interface{ Addr() uintptr }); ok {
			err = fmt.Errorf("%w at address %#x", ErrFault, fe.Addr())
			return
		}
		panic(r)
	}()
	f()
	return nil
}

// guardedChecksum is Checksum of mapped bytes under guardFault, with the
// fold kernel (internal/crc32c/checksum_fold.go).
func guardedChecksum(b []byte) (sum uint32, err error) {
	err = guardFault(func() { sum = crc32c.Checksum(b) })
	return sum, err
}

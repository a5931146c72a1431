package netguard

import (
	"os"
	"sync"
)

// reserve is a descriptor a Guard holds back so that a listener out of
// descriptors can still shed a queued connection (Listener.shed).
type reserve interface {
	// release gives the descriptor up for the caller to use; false when
	// none is held.
	release() bool
	// restore takes a descriptor back when one can be had (none after close).
	restore()
	// close gives the descriptor up for good.
	close() error
}

// fileReserve holds /dev/null open as the reserve. Safe for concurrent use.
type fileReserve struct {
	mu     sync.Mutex
	f      *os.File
	closed bool
}

// newFileReserve opens the reserve; without a descriptor to spare it holds
// none, and tries again at each restore.
func newFileReserve() *fileReserve {
	r := &fileReserve{}
	r.restore()
	return r
}

func (r *fileReserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return false
	}
	r.f.Close()
	r.f = nil
	return true
}

func (r *fileReserve) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil || r.closed {
		return
	}
	if f, err := os.Open(os.DevNull); err == nil {
		r.f = f
	}
}

func (r *fileReserve) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

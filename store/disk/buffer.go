package disk

import (
	"sync"
	"unsafe"
)

// alignedBuf returns a zeroed slice of n bytes (n a multiple of blockSize)
// whose first byte is at a blockSize boundary, as O_DIRECT requires.
func alignedBuf(n int64) []byte {
	b := make([]byte, n+blockSize)
	off := int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (blockSize - 1))
	if off != 0 {
		off = blockSize - off
	}
	return b[off : off+n : off+n]
}

// bufPool keeps released aligned buffers for reuse, by length, up to max
// bytes in all. Safe for concurrent use; never blocks on I/O.
type bufPool struct {
	mu   sync.Mutex
	free map[int64][][]byte
	held int64
	max  int64
}

func newBufPool(max int64) *bufPool { return &bufPool{free: make(map[int64][][]byte), max: max} }

// get returns an aligned buffer of n bytes (n a multiple of blockSize). Its
// contents are whatever a previous user left.
func (p *bufPool) get(n int64) []byte {
	p.mu.Lock()
	if l := p.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		p.free[n] = l[:len(l)-1]
		p.held -= n
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	return alignedBuf(n)
}

// put gives b back; it is dropped when the pool is full.
func (p *bufPool) put(b []byte) {
	n := int64(cap(b))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+n > p.max {
		return
	}
	p.free[n] = append(p.free[n], b[:n])
	p.held += n
}

package transfer

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// frameBuffers is the pool of the buffers OutFrame copies frames into. gRPC's
// default pool clears every buffer it hands out (a pass over a whole 1 MiB
// frame, about a sixth of a node's CPU when it serves reads); a frame buffer
// is overwritten from its first byte to its last at once, so this pool does
// not clear. Like gRPC's default pool it is shared by the process: a cache
// of memory, not state any caller can see.
var frameBuffers = newUnclearedPool()

// unclearedPool is a mem.BufferPool of power-of-two size classes from 4 KiB
// to 8 MiB; larger buffers are allocated and dropped. Safe for concurrent use.
type unclearedPool struct {
	classes [12]sync.Pool // class c holds buffers of capacity 4 KiB << c
}

func newUnclearedPool() *unclearedPool { return &unclearedPool{} }

// class returns the size class of a buffer of n bytes, or -1 when none fits.
func class(n int) int {
	if n <= 4<<10 {
		return 0
	}
	c := bits.Len(uint(n-1)) - 12
	if c >= len(unclearedPool{}.classes) {
		return -1
	}
	return c
}

// Get returns a buffer of length n whose contents are not cleared.
func (p *unclearedPool) Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 4<<10<<c)
	return &b
}

// Put returns a buffer Get handed out.
func (p *unclearedPool) Put(b *[]byte) {
	c := class(cap(*b))
	if c < 0 || cap(*b) != 4<<10<<c {
		return // not one of ours, or larger than any class
	}
	*b = (*b)[:0]
	p.classes[c].Put(b)
}

var _ mem.BufferPool = (*unclearedPool)(nil)

// BufferPool returns the process's pool of buffers that are not cleared when
// handed out, for gRPC's own buffers (experimental.BufferPool and
// experimental.WithBufferPool): gRPC fills every buffer it takes from its
// pool before reading it (a received HTTP/2 data frame is read whole into
// it, a write buffer is sent only up to what was written, a message is
// copied whole), so clearing is a pass over the bytes for nothing: 6 % of a
// node's CPU taking 256 KiB puts. Safe for concurrent use.
func BufferPool() mem.BufferPool { return frameBuffers }

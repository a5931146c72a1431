package clustertest

import (
	"encoding/binary"
	"sync"

	"golang.org/x/net/http2"
)

// Frames counts the HTTP/2 frames of every connection the nodes dialed to
// their peers, by type, in each direction: sent by the dialer (the
// coordinator asking) and by the peer (the owner answering). Frames that
// crossed before Network.ResetFrames are not counted. A snapshot: the
// counts keep moving.
type Frames struct {
	Sent, Received map[http2.FrameType]int
}

// Frames returns the frames counted since the Network was made or last
// reset.
func (n *Network) Frames() Frames {
	n.frames.mu.Lock()
	defer n.frames.mu.Unlock()
	f := Frames{Sent: map[http2.FrameType]int{}, Received: map[http2.FrameType]int{}}
	for t := range n.frames.sent {
		if n.frames.sent[t] > 0 {
			f.Sent[http2.FrameType(t)] = n.frames.sent[t]
		}
		if n.frames.received[t] > 0 {
			f.Received[http2.FrameType(t)] = n.frames.received[t]
		}
	}
	return f
}

// ResetFrames sets every count of Frames to zero.
func (n *Network) ResetFrames() {
	n.frames.mu.Lock()
	defer n.frames.mu.Unlock()
	n.frames.sent, n.frames.received = [256]int{}, [256]int{}
}

// frameCounts are a Network's counts, by frame type.
type frameCounts struct {
	mu             sync.Mutex
	sent, received [256]int
}

// frameReader follows the frames of one direction of a connection as its
// bytes pass, without keeping them: it counts each frame's type once its
// 9-byte header has passed. The dialer's direction begins with the
// client preface, which is no frame.
type frameReader struct {
	counts *frameCounts
	sent   bool
	skip   int     // bytes to pass before the next frame header (preface, payload)
	hdr    [9]byte // the header being read
	have   int     // bytes of hdr read
}

// feed follows b, the next bytes of the direction.
func (r *frameReader) feed(b []byte) {
	for len(b) > 0 {
		if r.skip > 0 {
			k := min(r.skip, len(b))
			r.skip -= k
			b = b[k:]
			continue
		}
		k := copy(r.hdr[r.have:], b)
		r.have += k
		b = b[k:]
		if r.have < len(r.hdr) {
			return
		}
		r.have = 0
		r.skip = int(binary.BigEndian.Uint32(append([]byte{0}, r.hdr[:3]...)))
		r.counts.mu.Lock()
		if r.sent {
			r.counts.sent[r.hdr[3]]++
		} else {
			r.counts.received[r.hdr[3]]++
		}
		r.counts.mu.Unlock()
	}
}

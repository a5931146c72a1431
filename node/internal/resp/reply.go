package resp

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// bigReply is the size from which a bulk reply is written from its own
// memory (writev) instead of being copied behind the pending replies.
const bigReply = 16 << 10

// writePiece is the most one write call sends: each gets WriteTimeout, so
// a client that reads steadily, however slowly, is never cut off.
const writePiece = 4 << 20

// segment is a piece of output queued for the connection: bytes and, for
// bytes the writer does not own (a chunk in shared memory), the function
// that lets them go once written.
type segment struct {
	data    []byte
	release func()
}

// writer turns replies into output. What the client does not take at once
// is queued and written from a goroutine of its own, so the connection's
// goroutine goes on reading requests while a reply is written: a client
// that sends a large value while it has not yet read a large reply (a
// pipeline) is served, not deadlocked. That goroutine runs only while
// something is queued (enqueue starts it, it ends once the queue is empty):
// an idle connection has none. Replies are built in buf (in the protocol
// version the connection chose: 2 unless HELLO 3) and queued by flush;
// large values are queued where they are (bulkOwned). The queue holds at
// most maxQueued bytes: past that, queueing blocks until the client reads.
// The methods that build replies are for the connection's goroutine only;
// close waits for the writing goroutine, if any, to write the queue.
type writer struct {
	nc        net.Conn
	timeout   time.Duration // for one write call; 0: none
	proto     int
	buf       []byte
	limit     int   // pending bytes above which buf is queued
	maxQueued int64 // bytes queued at most
	written   atomic.Int64
	mem       *memBudget // the server's, charged for queued heap bytes
	crlf      [2]byte    // "\r\n", written after a value sent from its own memory
	raw       *sockIO    // the socket's raw calls; nil: net's own (TLS)
	three     [3][]byte  // trySync's pieces, kept here so they do not escape per call
	send      sendSizer  // the socket's send buffer by reply size (loopback only)

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []segment
	queued  int64
	busy    bool  // a goroutine is writing to the connection now
	running bool  // the writing goroutine (loop) runs: the queue is not empty, or it is about to end
	err     error // the first write error; nothing is written after it
}

// newWriter returns a writer of nc with no reply buffer: the connection
// lends it one while it serves requests (conn.unpark); with none, the
// first reply allocates it.
func newWriter(nc net.Conn, raw *sockIO, timeout time.Duration, limit int, maxQueued int64, mem *memBudget) *writer {
	w := &writer{nc: nc, raw: raw, timeout: timeout, proto: 2, limit: limit, mem: mem,
		maxQueued: maxQueued, crlf: [2]byte{'\r', '\n'}, send: newSendSizer(nc)}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// failed returns the first write error, if any.
func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// syncWait is how long the connection's goroutine writes replies itself,
// when nothing is queued, before it queues what is left: the usual reply
// leaves without a hand-off to the writing goroutine, and a client that
// does not read costs the connection's goroutine no more than this.
const syncWait = 2 * time.Millisecond

// flush sends the pending replies: written at once when nothing is queued
// (trySync), queued otherwise. It blocks while the queue is full.
func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return w.failed()
	}
	n := w.trySync(w.buf, nil, nil)
	if n == len(w.buf) {
		w.buf = w.buf[:0]
		return w.failed()
	}
	b := w.buf[n:]
	w.buf = make([]byte, 0, min(max(cap(w.buf), 16<<10), 4*w.limit))
	return w.enqueue(segment{data: b})
}

// trySync writes a, then b, then c (b and c may be nil) on the connection
// from the caller's goroutine when nothing is queued and nothing is being
// written, for up to syncWait, and returns how many bytes of them together
// it wrote (0 when it could not try). A write error sticks, as the writing
// goroutine's do.
func (w *writer) trySync(a, b, c []byte) int {
	w.mu.Lock()
	if w.err != nil || w.busy || len(w.queue) > 0 {
		w.mu.Unlock()
		return 0
	}
	w.busy = true
	w.mu.Unlock()
	var n int64
	var err error
	switch {
	case w.raw != nil: // never waits: no deadline needed
		w.three = [3][]byte{a, b, c}
		n, err = w.raw.writeNow(w.three[:])
		w.three = [3][]byte{}
	case b == nil && c == nil:
		w.nc.SetWriteDeadline(time.Now().Add(syncWait))
		k, e := w.nc.Write(a)
		n, err = int64(k), e
	default:
		w.nc.SetWriteDeadline(time.Now().Add(syncWait))
		bufs := net.Buffers{a, b, c}
		n, err = bufs.WriteTo(w.nc)
	}
	w.written.Add(n)
	w.mu.Lock()
	w.busy = false
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) && w.err == nil {
		w.err = err
		w.nc.Close()
	}
	// Only the writing goroutine waits for busy to clear, and only with
	// something to do: waking it for nothing after every reply would cost
	// a scheduler round trip per reply.
	if w.err != nil || len(w.queue) > 0 {
		w.cond.Broadcast()
	}
	w.mu.Unlock()
	return int(n)
}

// enqueue adds seg to the queue, waiting while the queue holds maxQueued
// bytes, or while the server's client memory is spent and the queue holds
// anything (a reply on the heap is charged to it; with nothing queued it
// is charged anyway, so every connection can make progress). After a
// write error it releases seg and returns the error.
func (w *writer) enqueue(seg segment) error {
	n := int64(len(seg.data))
	charged := seg.release != nil // bytes in shared memory cost no heap
	w.mu.Lock()
	for w.err == nil {
		if w.queued == 0 || w.queued+n <= w.maxQueued {
			if charged || w.mem.take(n) {
				charged = true
				break
			}
			if w.queued == 0 {
				w.mem.force(n)
				charged = true
				break
			}
		}
		w.cond.Wait()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		if seg.release == nil && charged {
			w.mem.give(n)
		}
		if seg.release != nil {
			seg.release()
		}
		return err
	}
	w.queue = append(w.queue, seg)
	w.queued += n
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.cond.Broadcast()
	w.mu.Unlock()
	return nil
}

// drop lets a queued segment go: its bytes released, or its heap returned
// to the server's budget.
func (w *writer) drop(s segment) {
	if s.release != nil {
		s.release()
	} else {
		w.mem.give(int64(len(s.data)))
	}
}

// close queues what is pending and waits for the writing goroutine, if
// any, to write the queue (or fail); what was not written is released.
func (w *writer) close() {
	w.flush()
	w.mu.Lock()
	for w.running {
		w.cond.Wait()
	}
	w.mu.Unlock()
}

// loop writes queued segments until the queue is empty, then ends (enqueue
// starts it again). After a write error, which closes the connection so
// its reader stops too, it releases what is queued and ends.
func (w *writer) loop() {
	for {
		w.mu.Lock()
		for w.busy && len(w.queue) > 0 && w.err == nil {
			w.cond.Wait()
		}
		if len(w.queue) == 0 || w.err != nil {
			rest := w.queue
			w.queue, w.queued = nil, 0
			w.running = false
			w.cond.Broadcast()
			w.mu.Unlock()
			for _, s := range rest {
				w.drop(s)
			}
			return
		}
		batch := w.queue
		w.queue = nil
		w.busy = true
		w.mu.Unlock()
		err := w.writeBatch(batch)
		w.mu.Lock()
		w.busy = false
		for _, s := range batch {
			w.queued -= int64(len(s.data))
		}
		if err != nil && w.err == nil {
			w.err = err
			w.nc.Close()
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		for _, s := range batch {
			w.drop(s)
		}
	}
}

// writeBatch writes segments with writev, at most writePiece bytes per
// call, each call with its own deadline.
func (w *writer) writeBatch(batch []segment) error {
	var bufs net.Buffers
	size := 0
	send := func() error {
		if len(bufs) == 0 {
			return nil
		}
		deadline := time.Time{} // none; trySync may have left its own
		if w.timeout > 0 {
			deadline = time.Now().Add(w.timeout)
		}
		w.nc.SetWriteDeadline(deadline)
		var n int64
		var err error
		if w.raw != nil {
			n, err = w.raw.writeAll(bufs)
			// trySync's raw calls check the deadline too, though they
			// never wait: a passed one must not fail them.
			w.nc.SetWriteDeadline(time.Time{})
		} else {
			n, err = bufs.WriteTo(w.nc)
		}
		w.written.Add(n)
		bufs, size = bufs[:0], 0
		return err
	}
	for _, s := range batch {
		for d := s.data; len(d) > 0; {
			k := min(len(d), writePiece-size)
			bufs = append(bufs, d[:k])
			size += k
			d = d[k:]
			if size == writePiece {
				if err := send(); err != nil {
					return err
				}
			}
		}
	}
	return send()
}

// maybeFlush queues the pending replies when there are many of them.
func (w *writer) maybeFlush() {
	if len(w.buf) >= w.limit {
		w.flush()
	}
}

func (w *writer) simple(s string) {
	w.buf = append(append(append(w.buf, '+'), s...), '\r', '\n')
	w.maybeFlush()
}

func (w *writer) ok() { w.simple("OK") }

// error writes an error reply; msg starts with its prefix (ERR, NOAUTH, ...).
func (w *writer) error(msg string) {
	w.buf = append(append(append(w.buf, '-'), msg...), '\r', '\n')
	w.maybeFlush()
}

func (w *writer) int(n int64) {
	w.buf = strconv.AppendInt(append(w.buf, ':'), n, 10)
	w.buf = append(w.buf, '\r', '\n')
	w.maybeFlush()
}

func (w *writer) header(kind byte, n int) {
	w.buf = strconv.AppendInt(append(w.buf, kind), int64(n), 10)
	w.buf = append(w.buf, '\r', '\n')
}

// bulk writes a bulk string; b is only read until bulk returns (it is
// copied).
func (w *writer) bulk(b []byte) { w.bulkOwned(b, nil) }

// bulkOwned writes a bulk string of b. With release nil, b is only read
// until bulkOwned returns (it is copied). Otherwise the writer owns b and
// calls release once b is written (or will never be): a value from
// bigReply up is queued where it is, not copied, and the kernel copies it
// straight to the socket.
func (w *writer) bulkOwned(b []byte, release func()) {
	if release == nil || len(b) < bigReply {
		// Appended in one go, so that a fault while b is read (a segment
		// truncated under a lent chunk) leaves the pending replies as they
		// were.
		out := strconv.AppendInt(append(w.buf, '$'), int64(len(b)), 10)
		out = append(append(append(out, '\r', '\n'), b...), '\r', '\n')
		w.buf = out
		if release != nil {
			release()
		}
		w.maybeFlush()
		return
	}
	w.send.fit(len(b))
	w.header('$', len(b))
	head := len(w.buf)
	// The pending replies and the header, the value and its CRLF leave in
	// one writev: a CRLF sent apart would make the client wait for a
	// second segment before it has the whole reply.
	n := w.trySync(w.buf, b, w.crlf[:])
	switch {
	case n >= head+len(b):
		w.buf = append(w.buf[:0], w.crlf[n-head-len(b):]...)
		release()
	case n >= head:
		w.buf = w.buf[:0]
		w.enqueue(segment{data: b[n-head:], release: release})
		w.buf = append(w.buf, '\r', '\n')
	default:
		rest := w.buf[n:]
		w.buf = make([]byte, 0, cap(w.buf))
		w.enqueue(segment{data: rest})
		w.enqueue(segment{data: b, release: release})
		w.buf = append(w.buf, '\r', '\n')
	}
}

func (w *writer) bulkString(s string) {
	w.header('$', len(s))
	w.buf = append(append(w.buf, s...), '\r', '\n')
	w.maybeFlush()
}

// null writes a missing value: $-1 in RESP2, _ in RESP3.
func (w *writer) null() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
	} else {
		w.buf = append(w.buf, '$', '-', '1', '\r', '\n')
	}
	w.maybeFlush()
}

// nullArray writes a missing array: *-1 in RESP2, _ in RESP3.
func (w *writer) nullArray() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
	} else {
		w.buf = append(w.buf, '*', '-', '1', '\r', '\n')
	}
	w.maybeFlush()
}

// array starts an array of n elements.
func (w *writer) array(n int) { w.header('*', n) }

// mapHeader starts a map of n pairs: an array of 2n in RESP2.
func (w *writer) mapHeader(n int) {
	if w.proto == 3 {
		w.header('%', n)
	} else {
		w.header('*', 2*n)
	}
}

// setHeader starts a set of n elements: an array in RESP2.
func (w *writer) setHeader(n int) {
	if w.proto == 3 {
		w.header('~', n)
	} else {
		w.header('*', n)
	}
}

// strings writes an array of bulk strings.
func (w *writer) strings(ss ...string) {
	w.array(len(ss))
	for _, s := range ss {
		w.bulkString(s)
	}
}

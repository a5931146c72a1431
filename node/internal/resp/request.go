package resp

import (
	"github.com/kvring/kvring/internal/crc32c"

	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/kvring/kvring/store"
	"strconv"
)

// protocolError is input that breaks the protocol: the reply is an error
// and the connection is closed, since the stream cannot be resynchronised.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "Protocol error: " + e.msg }

func protoErr(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// AllocFunc reserves shared memory for a value of size bytes (at least 1):
// a blob the value is read into, published as a chunk by SET.
type AllocFunc func(size int64) (*store.Blob, error)

// request is one command: its arguments, with the values of write commands
// read into memory of their own.
type request struct {
	// args[0] is the command name as sent; args alias the reader's buffer
	// until the next request is read. A value argument is nil here.
	args [][]byte
	// name is args[0] in lower case.
	name string
	// values are the value arguments, in order (SET's, each of MSET's).
	values []argValue
	// inline reports a request sent as a line of text, not a multibulk.
	inline bool
}

// argValue is one value argument.
type argValue struct {
	at    int         // its argument position
	size  int64       // its length
	value *store.Blob // nil when it could not be kept (err) or is empty
	err   error       // why the value could not be kept (no memory, over the limit)
	// sum is the CRC-32C of a value read past because its key is stored
	// already (errKept), to tell whether the stored bytes are the same.
	sum uint32
}

// free frees every value the request holds.
func (r *request) free() {
	for i := range r.values {
		if r.values[i].value != nil {
			r.values[i].value.Free()
			r.values[i].value = nil
		}
	}
}

// limits bound what one request may make the server hold.
type limits struct {
	maxArgs     int   // arguments of one multibulk
	maxArgLen   int   // bytes of one argument that is not a value
	maxArgBytes int   // bytes of all arguments of one request that are not values
	maxInline   int   // bytes of an inline request's line
	maxValue    int64 // bytes of one value (the node's largest chunk)
	maxValues   int64 // bytes of all values of one request
}

// AdmitFunc decides, before any memory is taken for it, whether the value
// that follows key in command name may be kept: nil to read it into a blob,
// or the error the command will be refused with (the value is then read
// past: a refused or unauthenticated SET costs no shared memory).
type AdmitFunc func(name string, key []byte) error

// Limits on a client that has not authenticated yet, as Redis's: a few
// short arguments are all AUTH and HELLO need.
const (
	unauthMaxArgs   = 10
	unauthMaxArgLen = 16 << 10
)

// reader parses requests. Not safe for concurrent use.
type reader struct {
	raw io.Reader // under br: values are read from it directly
	br  *inbuf
	lim limits
	// unauth applies the limits of a client that has not authenticated.
	unauth bool
	buf    []byte // backing of the arguments that are not values
	// mem is the server's budget for argument memory; charged is what this
	// reader holds of it (see charge). nil mem: no bound.
	mem     *memBudget
	charged int64
	spans   []span // where each argument of the request being read is in buf
	args    [][]byte
	// scratch holds the buffers discard reads into (the server's, shared
	// by every connection); nil: values are discarded through br.
	scratch *sync.Pool
}

// span is an argument's place in reader.buf; value marks a value argument.
type span struct {
	off, n int
	value  bool
}

func newReader(r io.Reader, size int, lim limits) *reader {
	return &reader{raw: r, br: newInbuf(r, size), lim: lim}
}

// release drops buffers a large request grew, once it has been served, so
// an idle connection holds little.
func (rd *reader) release() {
	if cap(rd.buf) > argAllowance {
		rd.buf = nil
	}
	if cap(rd.args) > 1024 {
		rd.args, rd.spans = nil, nil
	}
	if rd.buf == nil || rd.args == nil {
		rd.uncharge()
	}
}

// argLimits are the bounds of the next request's arguments.
func (rd *reader) argLimits() (maxArgs, maxArgLen int) {
	if rd.unauth {
		return unauthMaxArgs, unauthMaxArgLen
	}
	return rd.lim.maxArgs, rd.lim.maxArgLen
}

// read parses the next request. alloc is asked for the memory of each value
// argument (valuePos decides which those are) that admit lets through. A
// *protocolError means the connection must close; other errors are the
// connection's. A request whose values could not all be kept is returned
// whole, with each value's error, so the stream stays in step.
func (rd *reader) read(alloc AllocFunc, admit AdmitFunc) (*request, error) {
	maxArgs, _ := rd.argLimits()
	for {
		c, err := rd.br.ReadByte()
		if err != nil {
			return nil, err
		}
		if c != '*' {
			rd.br.UnreadByte()
			req, err := rd.readInline(alloc, admit)
			if err != nil || req != nil {
				return req, err
			}
			continue // an empty line
		}
		n, err := rd.readInt('*')
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			continue // Redis ignores empty multibulks
		}
		if n > int64(maxArgs) {
			return nil, protoErr("invalid multibulk length")
		}
		return rd.readMultibulk(int(n), alloc, admit)
	}
}

// readMultibulk reads the n bulk arguments of a request. The arguments that
// are not values are read into one buffer, and sliced from it only once it
// has stopped growing: no argument keeps an outgrown array alive.
func (rd *reader) readMultibulk(n int, alloc AllocFunc, admit AdmitFunc) (*request, error) {
	_, maxArgLen := rd.argLimits()
	rd.buf, rd.spans = rd.buf[:0], rd.spans[:0]
	overhead := int64(0)
	if n > 1024 {
		overhead = int64(n) * argOverhead
	}
	if err := rd.charge(overhead); err != nil {
		return nil, err
	}
	req := &request{}
	var valueBytes int64
	for i := range n {
		if c, err := rd.br.ReadByte(); err != nil {
			req.free()
			return nil, err
		} else if c != '$' {
			req.free()
			return nil, protoErr("expected '$', got '%c'", c)
		}
		size, err := rd.readInt('$')
		if err != nil {
			req.free()
			return nil, err
		}
		if size < 0 || size > max(rd.lim.maxValue, maxBulk) || (rd.unauth && size > unauthMaxArgLen) {
			req.free()
			return nil, protoErr("invalid bulk length")
		}
		if i > 0 && valuePos(req.name, i) {
			v, err := rd.readValue(size, &valueBytes, alloc, rd.refusal(req.name, i, size, admit))
			if err != nil {
				req.free()
				return nil, err
			}
			v.at = i
			req.values = append(req.values, v)
			rd.spans = append(rd.spans, span{value: true})
			continue
		}
		if size > int64(maxArgLen) || len(rd.buf)+int(size) > rd.lim.maxArgBytes {
			req.free()
			return nil, protoErr("argument %d of %d bytes is over this server's limit of %d (only values may be longer)",
				i, size, maxArgLen)
		}
		start := len(rd.buf)
		if err := rd.charge(overhead + int64(start) + size); err != nil {
			req.free()
			return nil, err
		}
		rd.buf = slices.Grow(rd.buf, int(size))[:start+int(size)]
		if _, err := io.ReadFull(rd.br, rd.buf[start:]); err != nil {
			req.free()
			return nil, err
		}
		if err := rd.crlf(); err != nil {
			req.free()
			return nil, err
		}
		rd.spans = append(rd.spans, span{off: start, n: int(size)})
		if i == 0 {
			req.name = lower(rd.buf[:size])
		}
	}
	rd.args = rd.args[:0]
	for _, sp := range rd.spans {
		if sp.value {
			rd.args = append(rd.args, nil)
		} else {
			rd.args = append(rd.args, rd.buf[sp.off:sp.off+sp.n:sp.off+sp.n])
		}
	}
	req.args = rd.args
	return req, nil
}

// refusal is why the value at argument i of command name, of size bytes,
// is read past rather than kept: over the node's largest value (the
// connection stays usable), or admit's reason; nil to keep it.
func (rd *reader) refusal(name string, i int, size int64, admit AdmitFunc) error {
	switch {
	case size > rd.lim.maxValue:
		return fmt.Errorf("%w: a value of %d bytes is over this node's largest value, %d bytes (kvring serve --max-chunk-size)",
			errValueTooLarge, size, rd.lim.maxValue)
	case admit != nil:
		prev := rd.spans[i-1]
		return admit(name, rd.buf[prev.off:prev.off+prev.n])
	}
	return nil
}

// maxBulk is the longest bulk a client may declare and keep its connection
// (Redis's proto-max-bulk-len, 512 MB): a value over the node's largest but
// under it is read past and refused; a longer length is a protocol error,
// and the connection is closed, as Redis does.
const maxBulk = 512 << 20

// readValue reads a value argument of size bytes into memory from alloc,
// or past it when it cannot be kept (refused is why, when admit refused it).
func (rd *reader) readValue(size int64, total *int64, alloc AllocFunc, refused error) (argValue, error) {
	v := argValue{size: size}
	*total += size
	switch {
	case refused != nil:
		v.err = refused
	case size == 0:
		v.err = errEmptyValue
	case *total > rd.lim.maxValues:
		v.err = fmt.Errorf("%w: the request's values are over %d bytes", errTooBig, rd.lim.maxValues)
	default:
		v.value, v.err = alloc(size)
	}
	var err error
	switch {
	case v.value != nil:
		err = v.value.Fill(rd.br)
	case errors.Is(v.err, errKept):
		v.sum, err = rd.discardSum(size)
	default:
		err = rd.discard(size)
	}
	if err == nil {
		err = rd.crlf()
	}
	if err != nil && v.value != nil {
		v.value.Free()
		v.value = nil
	}
	return v, err
}

// discard reads past n bytes of a value that is not kept (its key is
// stored already, or it was refused): what the buffer holds, then straight
// from the connection into a scratch buffer, up to discardPiece bytes a
// read instead of the buffer's 16 KiB.
func (rd *reader) discard(n int64) error {
	k, err := rd.br.Discard(int(min(n, int64(rd.br.Buffered()))))
	n -= int64(k)
	if err != nil || n == 0 {
		return err
	}
	if rd.scratch == nil {
		_, err := rd.br.Discard(int(n))
		return err
	}
	p := rd.scratch.Get().(*[]byte)
	defer rd.scratch.Put(p)
	for n > 0 {
		m, err := rd.raw.Read((*p)[:min(n, int64(len(*p)))])
		n -= int64(m)
		if err == io.EOF && n > 0 {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// discardSum is discard that also returns the CRC-32C of the bytes it
// reads past: what the buffer holds, then straight from the connection
// into a scratch buffer, up to discardPiece bytes a read (a kept value's
// repeated SET costs one read and one checksum call per 256 KiB, not per
// 16 KiB).
func (rd *reader) discardSum(n int64) (uint32, error) {
	var sum uint32
	if b, _ := rd.br.Peek(int(min(n, int64(rd.br.Buffered())))); len(b) > 0 {
		sum = crc32c.UpdateChecksum(sum, b)
		rd.br.Discard(len(b))
		n -= int64(len(b))
	}
	if n == 0 {
		return sum, nil
	}
	var p []byte
	if rd.scratch != nil {
		sp := rd.scratch.Get().(*[]byte)
		defer rd.scratch.Put(sp)
		p = *sp
	} else {
		p = make([]byte, min(n, discardPiece))
	}
	src := io.Reader(rd.br) // a reader without scratch reads through its buffer
	if rd.scratch != nil {
		src = rd.raw
	}
	for n > 0 {
		m, err := src.Read(p[:min(n, int64(len(p)))])
		sum = crc32c.UpdateChecksum(sum, p[:m])
		n -= int64(m)
		if err == io.EOF && n > 0 {
			return sum, io.ErrUnexpectedEOF
		}
		if err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// discardPiece is the size of the scratch buffers discard reads into.
const discardPiece = 256 << 10

// newScratch returns a pool of discardPiece buffers, whose bytes nobody
// reads: readers of every connection share it.
func newScratch() *sync.Pool {
	return &sync.Pool{New: func() any { b := make([]byte, discardPiece); return &b }}
}

// readLine reads an inline request's line, up to maxInline bytes, into
// rd.buf: a line may be longer than the read buffer.
func (rd *reader) readLine() error {
	rd.buf = rd.buf[:0]
	for {
		part, err := rd.br.ReadSlice('\n')
		if len(rd.buf)+len(part) > rd.lim.maxInline {
			return protoErr("too big inline request")
		}
		rd.buf = append(rd.buf, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if len(rd.buf) >= rd.lim.maxInline {
			return protoErr("too big inline request") // no room for the '\n'
		}
	}
}

// readInline reads a request sent as a line of words (nil for an empty
// line). Its value arguments are copied into blobs from alloc, as a
// multibulk's are read into them.
func (rd *reader) readInline(alloc AllocFunc, admit AdmitFunc) (*request, error) {
	maxArgs, _ := rd.argLimits()
	if err := rd.readLine(); err != nil {
		return nil, err
	}
	fields := bytes.Fields(rd.buf)
	if len(fields) == 0 {
		return nil, nil
	}
	if len(fields) > maxArgs {
		return nil, protoErr("invalid multibulk length")
	}
	rd.args = append(rd.args[:0], bytes.Fields(rd.buf)...)
	req := &request{args: rd.args, name: lower(rd.args[0]), inline: true}
	var total int64
	for i := 1; i < len(req.args); i++ {
		if !valuePos(req.name, i) {
			continue
		}
		var refused error
		if admit != nil {
			refused = admit(req.name, req.args[i-1])
		}
		v := argValue{at: i, size: int64(len(req.args[i]))}
		total += v.size
		switch {
		case refused != nil:
			v.err = refused
		case v.size == 0:
			v.err = errEmptyValue
		case total > rd.lim.maxValues:
			v.err = fmt.Errorf("%w: the request's values are over %d bytes", errTooBig, rd.lim.maxValues)
		default:
			if v.value, v.err = alloc(v.size); v.err == nil {
				copy(v.value.Bytes(), req.args[i])
			}
		}
		req.values = append(req.values, v)
		req.args[i] = nil
	}
	return req, nil
}

// readInt reads the number that ends a '*' or '$' line.
func (rd *reader) readInt(kind byte) (int64, error) {
	line, err := rd.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > 24 {
		return 0, protoErr("invalid %s length", lengthKind(kind))
	}
	if err != nil {
		return 0, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return 0, protoErr("invalid %s length", lengthKind(kind))
	}
	digits := line[:len(line)-2]
	n, perr := strconv.ParseInt(string(digits), 10, 64)
	if perr != nil || len(digits) == 0 || digits[0] == '+' {
		return 0, protoErr("invalid %s length", lengthKind(kind))
	}
	return n, nil
}

func lengthKind(kind byte) string {
	if kind == '*' {
		return "multibulk"
	}
	return "bulk"
}

// crlf reads the CR LF that ends a bulk argument.
func (rd *reader) crlf() error {
	var b [2]byte
	if _, err := io.ReadFull(rd.br, b[:]); err != nil {
		return err
	}
	if b != [2]byte{'\r', '\n'} {
		return protoErr("expected CRLF after a bulk argument")
	}
	return nil
}

// valuePos reports whether argument i of command name is a value: read
// into memory of its own, and allowed up to the largest chunk.
func valuePos(name string, i int) bool {
	switch name {
	case "set", "setnx":
		return i == 2
	case "mset", "msetnx":
		return i%2 == 0
	}
	return false
}

// lower returns b in ASCII lower case as a string.
func lower(b []byte) string {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			return string(bytes.ToLower(b))
		}
	}
	return string(b)
}

package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Error is an error reply of the node: {"code": N, "message": "..."}, with
// Vineyard's codes (12 ObjectNotExists, 41 NotEnoughMemory, ...).
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("kvring local socket: code %d: %s", e.Code, e.Message)
}

// ErrClosed: the client was closed.
var ErrClosed = errors.New("kvring local socket: client closed")

// Config configures Dial. Zero fields take the documented defaults.
type Config struct {
	// Path is the node's socket file. Required.
	Path string
	// Timeout bounds each call (request written and reply read). Default
	// 30s. A call that times out closes the connection: the protocol
	// cannot skip a reply.
	Timeout time.Duration
	// JSON sends every request as JSON, also the creates and publishes the
	// client otherwise sends in kvring's binary framing (docs/vineyard.md
	// "Binary framing"). Default false. Without it, a node that answers a
	// binary request with a JSON error (one from before the framing) is
	// spoken to in JSON from then on.
	JSON bool
}

// Client is one connection to the local socket. When the connection
// breaks (the node stopped, a call timed out), the next call dials again
// and registers anew: the blobs, references and leases of the old
// connection are gone with it (the node released them), and their Data
// must not be used any more (the old mappings stay mapped until Close, so
// a stale slice reads old memory instead of faulting).
type Client struct {
	cfg        Config
	InstanceID uint64 // the node's instance id, from register

	mu       sync.Mutex
	nc       *net.UnixConn // nil while broken
	closed   bool
	noBinary bool             // the node answered a binary request in JSON
	noCodes  bool             // the node refused the publish codes flag (binary.go)
	noBinGet bool             // the node refused the binary get (binget.go)
	binGetOK bool             // a binary get succeeded on this connection
	maps     map[int64][]byte // store_fd → mapping of the whole segment file
	stale    [][]byte         // mappings of broken connections, unmapped by Close
	// populated: per mapped segment, a bit per page this client populated
	// (populate.go).
	populated map[int64][]uint64
	// owed: the releases queued by ReleaseLater whose answers are not
	// read yet, oldest first (release.go).
	owed            []owedRelease
	pending         []byte        // the frames of the releases queued by ReleaseLater, not sent yet
	refused         []error       // the deferred releases refused since the last Flush
	in              inbox         // what was read and not consumed yet (reader.go)
	releaseFailures atomic.Uint64 // deferred releases the node refused
}

// Dial connects to the socket at cfg.Path and registers. It blocks until
// the node answers or ctx ends.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	cl := &Client{cfg: cfg, maps: make(map[int64][]byte), populated: make(map[int64][]uint64)}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if err := cl.connect(ctx); err != nil {
		cl.closed = true
		return nil, err
	}
	return cl, nil
}

// connect dials the socket and registers. mu held.
func (c *Client) connect(ctx context.Context) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.cfg.Path)
	if err != nil {
		return fmt.Errorf("cannot connect to the local socket %q: %w", c.cfg.Path, err)
	}
	c.nc = nc.(*net.UnixConn)
	c.in.reset()
	c.nc.SetDeadline(time.Now().Add(c.cfg.Timeout))
	defer func() {
		if c.nc != nil {
			c.nc.SetDeadline(time.Time{})
		}
	}()
	var rep struct {
		InstanceID uint64 `json:"instance_id"`
		StoreMatch bool   `json:"store_match"`
		Code       int    `json:"code"`
		Message    string `json:"message"`
	}
	err = c.write(map[string]any{"type": "register_request", "version": "0.24.4", "store_type": "Normal"})
	var raw json.RawMessage
	if err == nil {
		raw, err = c.read()
	}
	if err == nil {
		err = json.Unmarshal(raw, &rep)
	}
	switch {
	case err != nil:
	case rep.Code != 0:
		err = &Error{Code: rep.Code, Message: rep.Message}
	case !rep.StoreMatch:
		err = errors.New("the node's store does not match")
	}
	if err != nil {
		c.nc.Close()
		c.nc = nil
		return fmt.Errorf("cannot register on %q: %w", c.cfg.Path, err)
	}
	c.InstanceID = rep.InstanceID
	// A new connection, maybe a newer node.
	c.noBinary, c.noCodes, c.noBinGet, c.binGetOK = false, false, false, false
	return nil
}

// Close sends the releases queued by ReleaseLater and reads their answers
// (returning the refused ones, as Flush), sends exit_request, closes the
// connection and unmaps every segment: slices of blobs obtained from the
// client must not be used afterwards. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	err := c.flushLocked(true)
	c.closed = true
	if c.nc != nil {
		_ = c.write(map[string]any{"type": "exit_request"})
		err = errors.Join(err, c.nc.Close())
		c.in.reset()
	}
	for k, m := range c.maps {
		unix.Munmap(m)
		delete(c.maps, k)
	}
	for _, m := range c.stale {
		unix.Munmap(m)
	}
	c.stale = nil
	clear(c.populated)
	return err
}

// Call sends req and decodes the reply into out (if not nil). An error
// reply is returned as *Error. It receives no descriptors: use it for
// requests whose replies describe no blob.
func (c *Client) Call(req any, out any) error {
	raw, err := c.roundTrip(req, nil)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("cannot decode the reply to %v: %w", typeOf(req), err)
		}
	}
	return nil
}

func typeOf(req any) any {
	if m, ok := req.(map[string]any); ok {
		return m["type"]
	}
	return req
}

// roundTrip writes req, reads the reply and, when payloads is not nil,
// calls it with the raw reply to learn the payloads whose descriptors
// follow, then receives and maps them.
func (c *Client) roundTrip(req any, payloads func([]byte) ([]Payload, error)) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(); err != nil {
		return nil, err
	}
	// The read deadline is left set after the call: nothing reads between
	// calls, and each sets its own (one timer change instead of four).
	c.nc.SetReadDeadline(time.Now().Add(c.cfg.Timeout))
	if err := c.write(req); err != nil { // after the queued releases
		c.fail()
		return nil, err
	}
	if err := c.settle(); err != nil {
		return nil, err
	}
	raw, err := c.read()
	if err != nil {
		c.fail()
		return nil, err
	}
	_, bin := req.(binRequest)
	if _, ok := req.(releaseIDs); ok {
		bin = false // only after a binary get, never from a node that lacks it
	}
	if err := replyError(raw, bin); err != nil {
		if errors.Is(err, errNoBinary) {
			c.noBinary = true // a node from before the binary framing
		}
		return nil, err
	}
	if payloads != nil {
		ps, err := payloads(raw)
		if err != nil {
			c.fail() // descriptors may follow a reply it cannot read
			return nil, err
		}
		if err := c.receive(ps); err != nil {
			c.fail()
			return nil, err
		}
	}
	return raw, nil
}

// ready checks the client is open and dials again when the connection is
// broken. mu held.
func (c *Client) ready() error {
	if c.closed {
		return ErrClosed
	}
	if c.nc != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	return c.connect(ctx)
}

// replyError is the error a reply carries: a binary error reply, or a
// JSON one ({"code", "message"}, no "type"), as an *Error; errNoBinary for
// JSON error 1 to a binary request (bin: a node from before the binary
// framing); nil for any other reply.
func replyError(raw []byte, bin bool) error {
	if len(raw) >= 2 && raw[0] == binMagic {
		if raw[1] == binError {
			return binErrorOf(raw[2:])
		}
		return nil
	}
	// Replies carry a "type"; error replies do not (only they are decoded
	// twice).
	if bytes.Contains(raw, []byte(`"type"`)) {
		return nil
	}
	var e Error
	if json.Unmarshal(raw, &struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
		Type    *string `json:"type"`
	}{Code: &e.Code, Message: &e.Message}) != nil || e.Code == 0 {
		return nil
	}
	if bin && e.Code == 1 {
		return errNoBinary
	}
	return &e
}

// fail closes a connection left in an unknown state; the next call dials
// again. The segments it mapped are kept (stale) until Close; the
// deferred releases queued or unanswered are dropped (the node dropped
// every reference of the connection when it went). mu held.
func (c *Client) fail() {
	c.nc.Close()
	c.nc = nil
	c.owed, c.pending = nil, nil
	c.in.reset()
	for k, m := range c.maps {
		c.stale = append(c.stale, m)
		delete(c.maps, k)
	}
	clear(c.populated)
}

func (c *Client) write(req any) error {
	msg, err := c.appendFrame(c.pending, req)
	c.pending = nil
	if err != nil {
		return err
	}
	if err := c.send(msg); err != nil {
		return fmt.Errorf("cannot send a request: %w", err)
	}
	return nil
}

// appendFrame appends req as a frame (8-byte length, then its body: a
// binRequest as it is, anything else in JSON). mu held.
func (c *Client) appendFrame(msg []byte, req any) ([]byte, error) {
	if ids, ok := req.(releaseIDs); ok {
		req = c.releaseRequest(ids)
	}
	body, isBin := req.(binRequest)
	if !isBin {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return msg, fmt.Errorf("cannot encode a request: %w", err)
		}
	}
	msg = binary.LittleEndian.AppendUint64(msg, uint64(len(body)))
	return append(msg, body...), nil
}

// receive receives the descriptor of each segment in ps not mapped yet, in
// order, and maps it. mu held.
func (c *Client) receive(ps []Payload) error {
	for _, p := range ps {
		if p.DataSize == 0 {
			continue
		}
		if _, ok := c.maps[p.StoreFD]; ok {
			continue
		}
		fd, err := c.recvFD()
		if err != nil {
			return err
		}
		m, err := unix.Mmap(fd, 0, int(p.MapSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("cannot map segment %d (%d bytes): %w", p.StoreFD, p.MapSize, err)
		}
		c.maps[p.StoreFD] = m
	}
	return nil
}

// Segments is the number of segments mapped on this connection.
func (c *Client) Segments() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.maps)
}

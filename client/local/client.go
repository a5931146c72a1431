package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
	maps     map[int64][]byte // store_fd → mapping of the whole segment file
	stale    [][]byte         // mappings of broken connections, unmapped by Close
	// populated: per mapped segment, a bit per page this client populated
	// (populate.go).
	populated map[int64][]uint64
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
	c.noBinary, c.noCodes = false, false // a new connection, maybe a newer node
	return nil
}

// Close sends exit_request, closes the connection and unmaps every
// segment: slices of blobs obtained from the client must not be used
// afterwards. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.nc != nil {
		_ = c.write(map[string]any{"type": "exit_request"})
		err = c.nc.Close()
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
	if c.closed {
		return nil, ErrClosed
	}
	if c.nc == nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		err := c.connect(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	c.nc.SetDeadline(time.Now().Add(c.cfg.Timeout))
	defer c.nc.SetDeadline(time.Time{})
	if err := c.write(req); err != nil {
		c.fail()
		return nil, err
	}
	raw, err := c.read()
	if err != nil {
		c.fail()
		return nil, err
	}
	_, bin := req.(binRequest)
	var e Error
	switch {
	case len(raw) >= 2 && raw[0] == binMagic:
		if raw[1] == binError {
			return nil, binErrorOf(raw[2:])
		}
	// Replies carry a "type"; error replies do not (only they are decoded
	// twice).
	case !bytes.Contains(raw, []byte(`"type"`)) && json.Unmarshal(raw, &struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
		Type    *string `json:"type"`
	}{Code: &e.Code, Message: &e.Message}) == nil && e.Code != 0:
		if bin && e.Code == 1 {
			c.noBinary = true // a node from before the binary framing
			return nil, errNoBinary
		}
		return nil, &e
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

// fail closes a connection left in an unknown state; the next call dials
// again. The segments it mapped are kept (stale) until Close. mu held.
func (c *Client) fail() {
	c.nc.Close()
	c.nc = nil
	for k, m := range c.maps {
		c.stale = append(c.stale, m)
		delete(c.maps, k)
	}
	clear(c.populated)
}

func (c *Client) write(req any) error {
	body, isBin := req.(binRequest)
	if !isBin {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return fmt.Errorf("cannot encode a request: %w", err)
		}
	}
	msg := make([]byte, 8+len(body))
	binary.LittleEndian.PutUint64(msg, uint64(len(body)))
	copy(msg[8:], body)
	if _, err := c.nc.Write(msg); err != nil {
		return fmt.Errorf("cannot send a request: %w", err)
	}
	return nil
}

func (c *Client) read() (json.RawMessage, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return nil, fmt.Errorf("cannot read a reply: %w", err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > 256<<20 {
		return nil, fmt.Errorf("cannot read a reply of %d bytes: too long", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return nil, fmt.Errorf("cannot read a reply: %w", err)
	}
	return body, nil
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

// recvFD receives one descriptor: one data byte with SCM_RIGHTS.
func (c *Client) recvFD() (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := c.nc.ReadMsgUnix(buf, oob)
	if err != nil {
		return -1, fmt.Errorf("cannot receive a segment descriptor: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("cannot receive a segment descriptor: no control message (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("cannot receive a segment descriptor: want one, got %d (%v)", len(fds), err)
	}
	return fds[0], nil
}

// Segments is the number of segments mapped on this connection.
func (c *Client) Segments() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.maps)
}

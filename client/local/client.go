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
}

// Client is one connection to the local socket.
type Client struct {
	cfg        Config
	InstanceID uint64 // the node's instance id, from register

	mu     sync.Mutex
	nc     *net.UnixConn
	closed bool
	maps   map[int64][]byte // store_fd → mapping of the whole segment file
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
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the local socket %q: %w", cfg.Path, err)
	}
	cl := &Client{cfg: cfg, nc: c.(*net.UnixConn), maps: make(map[int64][]byte), populated: make(map[int64][]uint64)}
	var rep struct {
		InstanceID uint64 `json:"instance_id"`
		StoreMatch bool   `json:"store_match"`
	}
	if err := cl.Call(map[string]any{"type": "register_request", "version": "0.24.4", "store_type": "Normal"}, &rep); err != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot register on %q: %w", cfg.Path, err)
	}
	if !rep.StoreMatch {
		cl.Close()
		return nil, fmt.Errorf("cannot register on %q: the node's store does not match", cfg.Path)
	}
	cl.InstanceID = rep.InstanceID
	return cl, nil
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
	_ = c.write(map[string]any{"type": "exit_request"})
	err := c.nc.Close()
	for k, m := range c.maps {
		unix.Munmap(m)
		delete(c.maps, k)
	}
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
func (c *Client) roundTrip(req any, payloads func(json.RawMessage) ([]Payload, error)) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
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
	var e Error
	// Replies carry a "type"; error replies do not (only they are decoded
	// twice).
	if !bytes.Contains(raw, []byte(`"type"`)) && json.Unmarshal(raw, &struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
		Type    *string `json:"type"`
	}{Code: &e.Code, Message: &e.Message}) == nil && e.Code != 0 {
		return nil, &e
	}
	if payloads != nil {
		ps, err := payloads(raw)
		if err != nil {
			return nil, err
		}
		if err := c.receive(ps); err != nil {
			c.fail()
			return nil, err
		}
	}
	return raw, nil
}

// fail closes a connection left in an unknown state. mu held.
func (c *Client) fail() {
	c.closed = true
	c.nc.Close()
}

func (c *Client) write(req any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("cannot encode a request: %w", err)
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

package resp

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/kvring/kvring/node/internal/tenant"
	"github.com/kvring/kvring/store"
)

// conn is one client connection, served by one goroutine that reads a
// command, runs it and buffers its reply in turn; replies are written when
// no more commands are waiting (a pipeline's replies leave together) or
// when they pass Config.ReplyBuffer.
type conn struct {
	s       *Server
	nc      net.Conn
	id      int64
	created time.Time
	rd      *reader
	w       *writer
	// sock is nc's raw side (nil: not a plain socket, TLS), and bufs the
	// pool's buffers the connection holds while it serves a request (nil
	// while it waits for one: idle.go).
	sock *sockIO
	bufs *ioBufs
	// lendFn and parkFn are lend and park, made once for sockIO.readIdle.
	lendFn func() []byte
	parkFn func()
	// cancel ends the context of the command in flight (Server.Close).
	cancel context.CancelFunc

	// Only the connection's goroutine touches these.
	name, libName, libVer string
	authed                bool
	access                Access
	lastCmd               string
	// readonly: the client sent READONLY, so reads of slots this node
	// holds as a replica are served here (Redis Cluster mode).
	readonly bool
	// lastPrefix, lastNS: the last namespace fields namespaceOf mapped,
	// and their namespace.
	lastPrefix []byte
	lastNS     string
	// refusedNS is the namespace an error reply of the command in flight
	// is about (warnRefusal): its first key's, or the key's it failed for.
	refusedNS string
	// client names the connection's client for the budgets shared among
	// clients (package tenant), and ctx carries it to the cluster's calls;
	// charged is what its request in flight took of Server.values.
	client    string
	base, ctx context.Context
	charged   int64
	// cmdDeadline is when the command being read must have arrived
	// (Config.CommandTimeout after its first byte).
	cmdDeadline time.Time
}

// readBuffer is the size of a connection's read buffer. A value argument's
// bytes that arrive with its header are copied out of it; the rest are
// read straight into the value's memory (store.Blob.Fill: the buffer
// hands over what it holds, then reads of 16 KiB or more go straight to
// the socket), so a small buffer
// copies less of every large SET, as Redis's 16 KiB reads do. Inline
// lines longer than it are assembled in the request buffer (readLine).
const readBuffer = 16 << 10

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, id: s.nextID.Add(1), created: time.Now()}
	raw := newSockIO(nc)
	var r io.Reader = nc
	if raw != nil {
		r = raw
	}
	c.sock = raw
	c.lendFn, c.parkFn = c.lend, c.park
	c.rd = &reader{raw: r, lim: s.cfg.limits()} // its buffers come from the pool (unpark)
	c.rd.mem = s.mem
	c.rd.scratch = s.scratch
	c.w = newWriter(nc, raw, s.cfg.WriteTimeout, s.cfg.ReplyBuffer, s.cfg.MaxReplyQueue, s.mem)
	c.anonymous()
	return c
}

// serve runs the connection until the client leaves, breaks the protocol,
// times out, or the server closes.
func (c *conn) serve() {
	ctx, cancel := context.WithCancel(context.Background())
	c.s.mu.Lock()
	c.cancel = cancel
	closed := c.s.closed
	c.s.mu.Unlock()
	defer cancel()
	c.base = ctx
	c.setClient(c.clientName(""))
	defer c.uncharge()
	defer c.rd.uncharge()
	defer c.nc.Close()
	defer c.park()    // once the replies are written
	defer c.w.close() // first: what is queued is written before the connection closes
	defer func() {
		if r := recover(); r != nil { // a bug must cost one connection, not the node
			c.s.log.Error("BUG: a Redis-protocol command panicked; closing its connection", "remote", c.nc.RemoteAddr(),
				"command", c.lastCmd, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if closed {
		return
	}
	for {
		if err := c.await(); err != nil {
			c.ended(err)
			return
		}
		c.rd.unauth = !c.authed
		req, err := c.rd.read(c.alloc, c.admit)
		if err != nil {
			c.ended(err)
			return
		}
		quit := c.run(req)
		req.free()
		c.uncharge()
		c.rd.release()
		if quit || c.w.failed() != nil {
			return
		}
	}
}

// await flushes the pending replies when no command is waiting and waits
// for the next one's first byte (within IdleTimeout), without buffers when
// it can (waitCommand), then gives the rest of the command CommandTimeout
// to arrive.
func (c *conn) await() error {
	if c.bufs == nil || c.rd.br.Buffered() == 0 {
		if err := c.w.flush(); err != nil {
			return err
		}
		if c.s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		} else {
			c.nc.SetReadDeadline(time.Time{})
		}
		if err := c.waitCommand(); err != nil {
			return err
		}
	}
	c.cmdDeadline = time.Now().Add(c.s.cfg.CommandTimeout)
	return c.nc.SetReadDeadline(c.cmdDeadline)
}

// waitCommand waits for the next command's first bytes (or the client's
// end) with the connection's buffers back in the pool when the socket has
// none yet, and reads them into its read buffer, taken again once the
// socket has them (sockIO.readIdle);
// a connection that is not a plain socket waits in its read buffer.
func (c *conn) waitCommand() error {
	if !c.canPark() {
		c.unpark()
		_, err := c.rd.br.Peek(1)
		return err
	}
	n, err := c.sock.readIdle(c.lendFn, c.parkFn) // parks when the socket has nothing yet
	if err != nil {
		return err
	}
	c.rd.br.prime(n)
	return nil
}

// ended reports why the connection ends: a protocol error is answered
// first; the rest is logged at debug level (clients leave all the time).
func (c *conn) ended(err error) {
	var pe *protocolError
	if errors.As(err, &pe) {
		c.s.m.error("protocol")
		c.w.error(prefixErr + " " + pe.Error())
		c.s.log.Info("closing a Redis-protocol connection that broke the protocol", "remote", c.nc.RemoteAddr(), "err", pe.msg)
		return
	}
	var me *clientMemoryError
	if errors.As(err, &me) {
		c.rd.uncharge() // before the reply: the client learns of the refusal once the memory is back
		c.s.m.error("client_memory")
		c.w.error(me.Error())
		c.s.log.Warn("closing a Redis-protocol connection: the connections' memory budget is spent", "remote", c.nc.RemoteAddr(),
			"needed", me.need, "used", me.used, "limit", me.limit)
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.s.m.error("timeout")
		c.s.log.Debug("closing an idle or slow Redis-protocol connection", "remote", c.nc.RemoteAddr())
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.s.log.Debug("Redis-protocol connection ended", "remote", c.nc.RemoteAddr(), "err", err)
	}
}

// admit decides whether the value after key may take shared memory: not
// for a command run will refuse (before AUTH, a key of a namespace the
// token does not allow, a key another node owns in cluster mode), whose
// reply then says why, nor for a key stored already (values are
// immutable: the write keeps the first value and has nothing to do).
func (c *conn) admit(name string, key []byte) error {
	cmd := commands[name]
	switch {
	case !c.authed && !cmd.noAuth:
		return errRefused
	case !c.access.allows(c.namespaceOf(key)):
		return errRefused
	case c.s.cfg.ClusterMode && c.redirectKey(cmd, key) != "":
		return errRefused
	case c.kept(key):
		c.s.m.kept()
		return errKept // the write has nothing to do: the value is read past
	}
	return nil
}

// kept reports whether key's chunk is stored already as its namespace asks
// (Cluster.Kept), so a write of it need not keep its value.
func (c *conn) kept(key []byte) bool {
	_, kept := c.s.cfg.Cluster.Kept(c.mapKey(key))
	return kept
}

// alloc is the memory of a value: a blob of the store, charged to the
// client's share of the values being received (Server.values) until its
// request has run (uncharge). The first value of a request waits for room
// in that budget until the command's deadline (valueShares.take).
func (c *conn) alloc(size int64) (*store.Blob, error) {
	if err := c.s.values.take(c.base, c.client, size, c.charged == 0, c.cmdDeadline); err != nil {
		return nil, err
	}
	b, err := c.s.cfg.Store.CreateBlob(size)
	if err != nil {
		c.s.values.give(c.client, size)
		return nil, err
	}
	c.charged += size
	return b, nil
}

// uncharge returns what the connection's request took of Server.values:
// its values are sealed into chunks or freed.
func (c *conn) uncharge() {
	c.s.values.give(c.client, c.charged)
	c.charged = 0
}

// unix reports whether the connection came through a Unix socket.
func (c *conn) unix() bool { return c.nc.LocalAddr().Network() == "unix" }

// clientName is the connection's client for the budgets shared among
// clients (tenant.Name): its token after AUTH, else its address; on a
// Unix socket, where clients have no address, the connection, as on
// loopback.
func (c *conn) clientName(token string) string {
	if token == "" && c.unix() {
		return "unix:" + strconv.FormatInt(c.id, 10)
	}
	return tenant.Name(token, c.nc.RemoteAddr())
}

// setClient names the connection's client (after AUTH, its token).
func (c *conn) setClient(name string) {
	c.client = name
	c.ctx = tenant.With(c.base, name) // the coordinator passes it on to owners
}

// run runs one command and reports whether the connection should close.
func (c *conn) run(req *request) (quit bool) {
	cmd, ok := commands[req.name]
	c.s.m.command(req.name)
	c.lastCmd, c.refusedNS = req.name, ""
	switch {
	case !ok:
		c.fail("unknown", errorf(prefixErr, "unknown command '%s', with args beginning with: %s", clip(req.args[0]), argsPreview(req.args[1:])))
		return false
	case !cmd.arityOK(len(req.args)):
		c.fail("arity", errorf(prefixErr, "wrong number of arguments for '%s' command", req.name))
		return false
	case !c.authed && !cmd.noAuth:
		c.fail("noauth", prefixNoAuth+" Authentication required.")
		return false
	}
	if msg := c.redirect(cmd, req); msg != "" {
		c.fail("moved", msg)
		return false
	}
	if cmd.run == nil { // quit
		c.w.ok()
		return true
	}
	cctx := newCallCtx(c.ctx, c.s.cfg.CallTimeout)
	defer cctx.end()
	cmd.run(cctx, c, req)
	return false
}

// fail writes an error reply and counts it by reason; a refused write is
// logged too (warnRefusal).
func (c *conn) fail(reason, msg string) {
	c.s.m.error(reason)
	c.warnRefusal(reason, msg)
	c.w.error(msg)
}

// failErr writes the error reply of err (errorReply).
func (c *conn) failErr(err error) {
	msg, reason := errorReply(err)
	c.fail(reason, msg)
}

// clip shortens a client's argument for an error reply.
func clip(b []byte) string {
	const max = 128
	s := string(b)
	if len(s) > max {
		s = s[:max] + "..."
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return "(binary)"
		}
	}
	return s
}

func argsPreview(args [][]byte) string {
	out := ""
	for i, a := range args {
		if i == 3 {
			break
		}
		out += "'" + clip(a) + "' "
	}
	return out
}

// anonymous gives the connection the access of a client that has not
// authenticated.
func (c *conn) anonymous() {
	a, required := c.s.cfg.Cluster.Anonymous()
	c.access, c.authed = a, !required
}

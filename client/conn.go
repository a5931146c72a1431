package client

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"

	"github.com/kvring/kvring/transfer"
)

// conn keeps one gRPC connection to some node of a kvring cluster and tells the truth about it.
//
// newConn returns at once; a goroutine owned by the conn connects to the seeds in turn with backoff, verifies each
// connection with a gRPC health check, watches it (transport state, periodic health checks, failures reported by
// the call layer) and reconnects after a loss, trying the lost node first. Every state change is logged once and
// published to State and ConnConfig.OnStateChange. close stops the goroutine and waits for it.
//
// All methods are safe for concurrent use; none blocks except close.
type conn struct {
	cfg      ConnConfig
	log      *slog.Logger
	dialOpts []grpc.DialOption
	backoff  backoff

	cur     atomic.Pointer[connSnapshot] // written only by the loop goroutine (and newConn before it starts)
	recheck chan struct{}                // cap 1: ask the loop for a health check now

	stop      context.CancelFunc // cancels the loop's context
	done      chan struct{}      // closed when the loop goroutine has exited
	closeOnce sync.Once

	// retiring holds connections declared lost but left open for
	// retireGrace, so calls already in flight on a node that is draining
	// (health NOT_SERVING, requests still served) can finish.
	retireMu sync.Mutex
	retiring map[*grpc.ClientConn]*time.Timer
}

// retireGrace is how long a lost connection stays open for the calls in
// flight on it. New calls never use it.
const retireGrace = 15 * time.Second

// retire closes cc after retireGrace, or at close.
func (c *conn) retire(cc *grpc.ClientConn) {
	c.retireMu.Lock()
	defer c.retireMu.Unlock()
	if c.retiring == nil {
		c.retiring = make(map[*grpc.ClientConn]*time.Timer)
	}
	c.retiring[cc] = time.AfterFunc(retireGrace, func() {
		c.retireMu.Lock()
		delete(c.retiring, cc)
		c.retireMu.Unlock()
		_ = cc.Close()
	})
}

// closeRetired closes every retiring connection now.
func (c *conn) closeRetired() {
	c.retireMu.Lock()
	defer c.retireMu.Unlock()
	for cc, t := range c.retiring {
		t.Stop()
		_ = cc.Close()
	}
	c.retiring = nil
}

// connSnapshot pairs a state with the connection it describes; cc is non-nil only while Connected.
type connSnapshot struct {
	state ConnState
	cc    *grpc.ClientConn
	// next is closed when the snapshot is replaced (ready waits on it).
	next chan struct{}
}

// newConn validates cfg and starts connecting in the background. It never blocks and fails only for an invalid
// config, never because the cluster cannot be reached.
func newConn(cfg ConnConfig) (*conn, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A 1 MiB write buffer (gRPC holds it only while writing) sends a frame
	// in one write(2) instead of 32: ~7 % more put throughput with 2 MiB
	// chunks on loopback. transfer.Codec, which Put and Get need to move
	// chunk bytes without copies, comes after the caller's options so that
	// none replaces it.
	secOpts, err := cfg.securityOptions()
	if err != nil {
		return nil, err
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithWriteBufferSize(1 << 20),
		// gRPC fills every buffer it takes from its pool before reading
		// it: a pool that does not clear them saves a pass over the bytes.
		experimental.WithBufferPool(transfer.BufferPool())}, secOpts...)
	opts = append(opts, cfg.DialOptions...)
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(transfer.NewCodec())))
	// grpc.NewClient does no I/O: creating (and dropping) one client per seed checks targets and options now,
	// so that a bad option is a config error rather than an endless series of failed attempts.
	for i, s := range cfg.Seeds {
		cc, err := grpc.NewClient(s, opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: Seeds[%d] %q with DialOptions: %w", errInvalidConnConfig, i, s, err)
		}
		_ = cc.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		cfg:      cfg,
		log:      cfg.Logger,
		dialOpts: opts,
		backoff:  backoff{base: cfg.BackoffBase, max: cfg.BackoffMax, jitter: cfg.Jitter},
		recheck:  make(chan struct{}, 1),
		stop:     cancel,
		done:     make(chan struct{}),
	}
	c.cur.Store(&connSnapshot{state: ConnState{
		Status: ConnConnecting, Addr: cfg.Seeds[0], Attempt: 1, Since: time.Now(),
	}})
	go c.run(ctx)
	return c, nil
}

// State returns the current connection state. It does not block.
func (c *conn) State() ConnState {
	return c.cur.Load().state
}

// ready returns the connection to use for a call. Right after a loss it waits for the first round of attempts to
// reconnect (awaitFirstAttempt: at most DialTimeout, and while ctx lasts); otherwise it does not wait: while no
// node is connected it fails at once with an Unavailable error wrapping errNotConnected (and so transfer.ErrUnavailable) that says why and which
// attempt is under way; after close it fails with a Canceled error wrapping errConnClosed
// (transfer.ErrClientClosed).
//
// The returned ClientConn may be closed by the conn at any time after a loss; calls on it then fail and should
// be reported with reportFailure(cc.Target(), err). cc.Target() is the node's address as given in Seeds.
func (c *conn) ready(ctx context.Context) (*grpc.ClientConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap := c.cur.Load()
	if s := snap.state; s.Status == ConnReconnecting && s.Attempt <= len(c.cfg.Seeds) {
		snap = c.awaitFirstAttempt(ctx, snap)
	}
	switch snap.state.Status {
	case ConnConnected:
		return snap.cc, nil
	case ConnClosed:
		return nil, withCode(errConnClosed)
	}
	s := snap.state
	cause := fmt.Sprintf("%s %s, attempt %d", s.Status, s.Addr, s.Attempt)
	if s.LastError != "" {
		cause = fmt.Sprintf("last error: %s; %s, attempt %d", s.LastError, s.Status, s.Attempt)
	}
	return nil, withCode(fmt.Errorf("%w (%s)", errNotConnected, cause))
}

// awaitFirstAttempt waits, at most DialTimeout (one attempt's bound) and
// while ctx lasts, for the first round of attempts to reconnect after a
// loss (each seed once, without backoff) to end, and returns the state
// then. A node that restarts or hands its engines over (a rolling restart;
// the seed a load balancer in front of several nodes, or the next seed)
// so costs a call a short wait instead of an error; once that round has
// failed, calls fail at once until the connection is back.
func (c *conn) awaitFirstAttempt(ctx context.Context, snap *connSnapshot) *connSnapshot {
	if snap.next == nil {
		return snap
	}
	t := time.NewTimer(c.cfg.DialTimeout)
	defer t.Stop()
	for {
		select {
		case <-snap.next:
			snap = c.cur.Load()
			if s := snap.state; s.Status != ConnReconnecting || s.Attempt > len(c.cfg.Seeds) || snap.next == nil {
				return snap
			}
		case <-t.C:
			return c.cur.Load()
		case <-ctx.Done():
			return c.cur.Load()
		}
	}
}

// reportFailure tells the conn that a call to addr failed, typically with codes.Unavailable, so that it
// health-checks the node now rather than at the next probe. It does not block, does not log, and is ignored
// unless addr is the node connected now. A failed check then starts reconnection.
func (c *conn) reportFailure(addr string, err error) {
	if err == nil {
		return
	}
	if s := c.cur.Load().state; s.Status != ConnConnected || s.Addr != addr {
		return
	}
	select {
	case c.recheck <- struct{}{}:
	default: // a check is already pending
	}
}

// close stops the background goroutine, waits for it to exit and closes the connection. Calls in flight on the
// connection fail. Idempotent; later calls return nil at once.
func (c *conn) close() error {
	c.closeOnce.Do(func() {
		c.stop()
		<-c.done
		c.closeRetired()
	})
	return nil
}

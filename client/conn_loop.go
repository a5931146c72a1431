package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvring/kvring/transfer"
)

// errProbeTimeout marks a health check that got no answer in time.
var errProbeTimeout = errors.New("no answer")

// errNotServing marks a node that answers but reports it does not serve
// (it drains before it stops, or has not started serving).
var errNotServing = errors.New("node reports")

// run is the connection loop, the only goroutine a conn starts besides the transport watcher of watch. It is the
// only writer of c.cur after newConn, so each state change is published and logged exactly once, here.
//
// Attempts go to the seeds in turn, starting with the first; after a loss, with the node just lost (it may be
// restarting on its address), unless it said it does not serve (it drains before it stops): then with the next
// seed. The first round of attempts over the seeds, and the first after a loss, go at once; attempts of round r
// wait backoff.delay(r).
func (c *conn) run(ctx context.Context) {
	defer close(c.done)
	var (
		idx     int              // index in Seeds of the next node to try
		attempt int              // attempts since creation or since the last loss
		lastErr error            // why the previous attempt failed, or why the connection was lost
		lostAt  time.Time        // when the connection was last lost; zero before the first loss
		status  = ConnConnecting // Connecting until the first connection, then Reconnecting while not connected
		addr    = c.cfg.Seeds[0] // the node tried or connected to last
		cc      *grpc.ClientConn // non-nil while connected
	)
	c.notify(c.cur.Load().state) // the initial state, stored by newConn
	for ctx.Err() == nil {
		attempt++
		addr = c.cfg.Seeds[idx]
		// The first round over the seeds goes at once; backoff grows per round.
		delay := time.Duration(0)
		if round := (attempt - 1) / len(c.cfg.Seeds); round > 0 {
			delay = c.backoff.delay(round, rand.Float64())
		}
		c.publish(ConnState{Status: status, Addr: addr, Attempt: attempt, LastError: connErrText(lastErr)}, nil)
		c.logAttempt(status, addr, attempt, delay, lastErr)
		if !connSleep(ctx, delay) {
			break
		}
		var err error
		if cc, err = c.dial(ctx, addr); err != nil {
			lastErr = fmt.Errorf("%s: %w", addr, err) // the next line logged names the next node
			idx = (idx + 1) % len(c.cfg.Seeds)
			continue
		}

		// Log first: whoever sees the state Connected finds the line already written.
		if lostAt.IsZero() {
			c.log.Info("connected to kvring node", "addr", addr, "attempts", attempt)
		} else {
			c.log.Info("connected again", "addr", addr, "after", time.Since(lostAt).Round(time.Millisecond),
				"attempts", attempt)
		}
		c.publish(ConnState{Status: ConnConnected, Addr: addr}, cc)
		err = c.watch(ctx, cc, addr)
		if ctx.Err() != nil {
			break
		}
		lostAt, lastErr, attempt, status = time.Now(), fmt.Errorf("%s: %w", addr, err), 0, ConnReconnecting
		// Publish before closing, so that ready stops handing out cc before it is closed.
		c.publish(ConnState{Status: status, Addr: addr, Attempt: 1, LastError: connErrText(lastErr)}, nil)
		c.log.Warn("lost connection to kvring node", "addr", addr, "err", err)
		if errors.Is(err, errNotServing) {
			idx = (idx + 1) % len(c.cfg.Seeds) // it drains: go on to the next seed at once
		}
		// A draining node still answers the calls it has: leave them time.
		c.retire(cc)
		cc = nil
	}
	c.publish(ConnState{Status: ConnClosed, Addr: addr}, nil)
	if cc != nil {
		_ = cc.Close()
	}
	c.log.Info("kvring connection closed", "addr", addr)
}

// logAttempt logs one line per connection attempt, before its delay.
func (c *conn) logAttempt(status ConnStatus, addr string, attempt int, delay time.Duration, lastErr error) {
	msg, level := "reconnecting", slog.LevelWarn
	if status == ConnConnecting {
		msg = "connecting to kvring node"
		if lastErr == nil {
			level = slog.LevelInfo
		}
	}
	args := []any{"addr", addr, "attempt", attempt, "delay", delay.Round(time.Millisecond)}
	if lastErr != nil {
		args = append(args, "last_err", lastErr)
	}
	c.log.Log(context.Background(), level, msg, args...)
}

// publish makes s (with cc while Connected) the current state and calls OnStateChange, unless s equals the
// current state. Since is kept while the status does not change. Only run calls publish.
func (c *conn) publish(s ConnState, cc *grpc.ClientConn) {
	old := c.cur.Load().state
	if s.sameAs(old) {
		return
	}
	s.Since = old.Since
	if s.Status != old.Status {
		s.Since = time.Now()
	}
	prev := c.cur.Swap(&connSnapshot{state: s, cc: cc, next: make(chan struct{})})
	if prev.next != nil {
		close(prev.next)
	}
	c.notify(s)
}

func (c *conn) notify(s ConnState) {
	if c.cfg.OnStateChange != nil {
		c.cfg.OnStateChange(s)
	}
}

// dial makes one connection attempt to addr: a new ClientConn (so that grpc's own reconnection backoff never
// delays ours) verified by a health check within DialTimeout.
func (c *conn) dial(ctx context.Context, addr string) (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient(addr, c.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("cannot create gRPC client: %w", err)
	}
	if err := c.check(ctx, cc, c.cfg.DialTimeout); err != nil {
		_ = cc.Close()
		return nil, err
	}
	return cc, nil
}

// check runs one health check (service "") on cc. Only SERVING counts as healthy. The call does not wait for a
// connection: an unreachable node fails at once with the transport's reason (e.g. connection refused).
func (c *conn) check(ctx context.Context, cc *grpc.ClientConn, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(cctx, &healthpb.HealthCheckRequest{})
	// transfer.FromStatus(err) prints as the status's message.
	switch code := transfer.Code(err); {
	case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
		return nil
	case err == nil:
		return fmt.Errorf("health check: %w %s", errNotServing, resp.GetStatus())
	case ctx.Err() != nil:
		return ctx.Err()
	case code == codes.DeadlineExceeded: // our deadline, or the node's copy of it, which may fire first
		return fmt.Errorf("health check: %w within %s", errProbeTimeout, timeout)
	case code == codes.Unimplemented:
		return fmt.Errorf("health check: node does not serve grpc.health.v1.Health (not a kvring node?): %v",
			transfer.FromStatus(err))
	default:
		return fmt.Errorf("health check: %s: %v", code, transfer.FromStatus(err))
	}
}

// watch health-checks the connected node every ProbeInterval (jittered), and at once when the transport leaves
// READY or the call layer reports a failure. It returns why the node is lost, or ctx.Err() when the conn is
// closed. A check that times out while the transport is still READY (an overloaded node or link) is repeated at
// once; a second failure in a row is a loss. Any other failure is a loss at once.
func (c *conn) watch(ctx context.Context, cc *grpc.ClientConn, addr string) error {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() { c.watchTransport(wctx, cc) })

	timer := time.NewTimer(c.probeInterval())
	defer timer.Stop()
	suspect := false // the previous check timed out on a READY transport
	for {
		if !suspect {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			case <-c.recheck:
			}
		}
		err := c.check(ctx, cc, c.cfg.ProbeTimeout)
		switch {
		case err == nil:
			suspect = false
		case ctx.Err() != nil:
			return ctx.Err()
		case !suspect && errors.Is(err, errProbeTimeout) && cc.GetState() == connectivity.Ready:
			suspect = true
			c.log.Debug("kvring node slow to answer health check, checking again", "addr", addr, "err", err)
			continue
		default:
			return err
		}
		timer.Reset(c.probeInterval())
	}
}

// watchTransport asks for a health check (through c.recheck) whenever cc's transport is not READY, e.g. as soon
// as the node closes the connection. It returns when ctx is done.
func (c *conn) watchTransport(ctx context.Context, cc *grpc.ClientConn) {
	s := cc.GetState()
	for {
		if s != connectivity.Ready {
			select {
			case c.recheck <- struct{}{}:
			default:
			}
		}
		if !cc.WaitForStateChange(ctx, s) {
			return
		}
		s = cc.GetState()
	}
}

// probeInterval returns ProbeInterval scaled by a random factor in [1-Jitter, 1+Jitter].
func (c *conn) probeInterval() time.Duration {
	return time.Duration(float64(c.cfg.ProbeInterval) * (1 + c.cfg.Jitter*(2*rand.Float64()-1)))
}

// connSleep waits for d or until ctx is done, and reports whether ctx is still live.
func connSleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func connErrText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

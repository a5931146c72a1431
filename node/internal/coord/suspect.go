package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvring/kvring/transfer"
)

// Writes to an owner gossip suspects. A peer cut off by a partition (or
// paused, or dead) answers nothing: without help a write would wait for it
// until PeerTimeout per step, or the engine's deadline, and only then fail
// or substitute. Gossip suspects such a member within a few probe intervals
// and declares it dead seconds later (until then it stays on the ring), so
// a write stops waiting for it as soon as Config.Suspect says so: an owner
// suspected before its prepare is not asked at all and is replaced
// (substitute.go), and the session of an owner suspected while the write
// waits for it is cut at once (suspectWatch), failing its share (its
// chunks are replaced if it was still preparing; otherwise they are held by
// fewer owners, or failed when none holds them). A suspected owner is not
// asked to abort: it frees what it staged itself when the stream ends
// before its votes, and after the stage lease otherwise.

// errSuspect is the failure of an owner gossip suspects: Unavailable, so
// its chunks are substituted and the outage log counts it down.
var errSuspect = fmt.Errorf("%w: gossip suspects the member is down", transfer.ErrUnavailable)

// suspectPoll is how often a write asks Config.Suspect about the owners it
// waits for.
const suspectPoll = 100 * time.Millisecond

// suspected reports whether gossip suspects s's owner (never this node).
func (c *Coordinator) suspected(id string) bool {
	return id != c.cfg.Self && c.cfg.Suspect != nil && c.cfg.Suspect(id)
}

// cutIfSuspected cuts s's session when gossip suspects its owner, and
// reports whether it did.
func (c *Coordinator) cutIfSuspected(s *ownerShare) bool {
	if !s.remote || !c.suspected(s.member.ID) {
		return false
	}
	s.cut(errSuspect)
	return true
}

// suspectWatch cuts the sessions of a write's owners once gossip suspects
// them: one goroutine for the write, started with its first remote owner,
// stopped (and waited for) by stop.
type suspectWatch struct {
	mu     sync.Mutex
	shares []*ownerShare // guarded by mu; their member, remote and cut are immutable
	done   chan struct{}
	wg     sync.WaitGroup
}

// add watches the remote ones of shares from now on, asking c.
func (w *suspectWatch) add(c *Coordinator, shares map[string]*ownerShare) {
	if c.cfg.Suspect == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range shares {
		if s.remote {
			w.shares = append(w.shares, s)
		}
	}
	if w.done == nil && len(w.shares) > 0 {
		w.done = make(chan struct{})
		w.wg.Go(func() { w.loop(c) })
	}
}

func (w *suspectWatch) loop(c *Coordinator) {
	t := time.NewTicker(suspectPoll)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		w.mu.Lock()
		shares := w.shares
		w.mu.Unlock()
		for _, s := range shares {
			c.cutIfSuspected(s)
		}
	}
}

// stop ends the watch and waits for its goroutine.
func (w *suspectWatch) stop() {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done != nil {
		close(done)
		w.wg.Wait()
	}
}

// cutBySuspicion reports whether s's session was cut because gossip
// suspects its owner.
func (s *ownerShare) cutBySuspicion() bool {
	return errors.Is(context.Cause(s.life), errSuspect)
}

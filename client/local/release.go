package local

import (
	"errors"
	"fmt"
	"time"
)

// ReleaseError is a release queued by ReleaseLater that the node refused:
// it answered with an error (Err, an *Error), or released fewer references
// than the request named (Released of len(IDs); the connection held no
// reference to the others).
type ReleaseError struct {
	IDs      []uint64
	Released int
	Err      error
}

func (e *ReleaseError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("kvring local socket: the deferred release of %d blobs %#x was refused: %v", len(e.IDs), e.IDs, e.Err)
	}
	return fmt.Sprintf("kvring local socket: the deferred release of blobs %#x released %d of %d references",
		e.IDs, e.Released, len(e.IDs))
}

func (e *ReleaseError) Unwrap() error { return e.Err }

// maxQueued is how many releases ReleaseLater queues before it sends them
// and reads their answers itself (as Flush), so neither the queue nor the
// node's unread answers grow without bound.
const maxQueued = 256

// maxRefusedKept is how many refused deferred releases Flush returns at
// most (the first ones since the last Flush); DeferredReleaseFailures
// counts them all.
const maxRefusedKept = 64

// owedRelease is a deferred release whose answer is still to be read.
type owedRelease struct{ ids []uint64 }

// releaseIDs is a release of blobs, encoded when it is queued or written:
// in binary on a connection where a binary get succeeded (binget.go).
type releaseIDs []uint64

// ReleaseLater drops one reference to each blob of ids, like ReleaseAll,
// without a round trip of its own: it queues the release, which goes out
// in the same write as the next call's request, and the node answers it
// first; that call reads the answer before its own. Flush and Close send
// what is queued and read the answers. Until then the blobs stay
// referenced (a lent chunk stays lent): an engine that goes idle calls
// Flush. A blob's Data must not be used once ReleaseLater is called. It
// does not block, but for every maxQueued (256) releases queued with no
// call in between it sends them and waits for the answers, as Flush.
//
// A release the node refused (an error reply, or fewer references
// released than ids named) is not lost: the next Flush or Close returns
// it as a *ReleaseError (joined with the others), and
// DeferredReleaseFailures counts it. The call whose write carried it is
// not failed by it (its own result stands). ReleaseLater on a broken
// connection queues nothing and returns nil: the blobs came from the
// connection that broke, and the node dropped its references when it
// went. Use ReleaseAll when the count is needed at once.
func (c *Client) ReleaseLater(ids []uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.nc == nil {
		return nil
	}
	var err error
	if c.pending, err = c.appendFrame(c.pending, releaseIDs(ids)); err != nil {
		return err
	}
	c.owed = append(c.owed, owedRelease{ids: append([]uint64(nil), ids...)})
	if len(c.owed) < maxQueued {
		return nil
	}
	return c.flushLocked(false)
}

// Flush sends the releases queued by ReleaseLater and reads their answers
// and those of any sent before. It returns the *ReleaseError of every
// deferred release the node refused since the last Flush (joined; the
// first maxRefusedKept, 64, of them), or the error of a connection that
// broke meanwhile (its references are gone with it). It blocks until the
// answers arrive or the call's Timeout.
func (c *Client) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return c.flushLocked(true)
}

// flushLocked sends what is queued and reads the owed answers; with
// report, it returns (and forgets) the refusals recorded so far. mu held.
func (c *Client) flushLocked(report bool) error {
	var err error
	if c.nc != nil && len(c.owed) > 0 {
		c.nc.SetReadDeadline(time.Now().Add(c.cfg.Timeout)) // left set, as roundTrip's
		if err = c.sendPending(); err == nil {
			err = c.settle()
		}
	}
	if report {
		err = errors.Join(err, errors.Join(c.refused...))
		c.refused = nil
	}
	return err
}

// sendPending writes the queued releases. mu held.
func (c *Client) sendPending() error {
	if len(c.pending) == 0 {
		return nil
	}
	err := c.send(c.pending)
	c.pending = nil
	if err != nil {
		c.fail()
		return fmt.Errorf("cannot send the deferred releases: %w", err)
	}
	return nil
}

// DeferredReleaseFailures is how many releases queued by ReleaseLater the
// node refused, since Dial. Safe for concurrent use; does not block.
func (c *Client) DeferredReleaseFailures() uint64 { return c.releaseFailures.Load() }

// settle reads the owed answers, oldest first, and records the refused
// releases; an error is one of reading (the connection is failed). mu
// held, the queued releases sent, the read deadline set.
func (c *Client) settle() error {
	for len(c.owed) > 0 {
		o := c.owed[0]
		raw, err := c.read()
		if err != nil {
			c.fail()
			return fmt.Errorf("cannot read the answer to a deferred release: %w", err)
		}
		c.owed = c.owed[1:]
		if err := checkRelease(raw, o.ids); err != nil {
			c.releaseFailures.Add(1)
			if len(c.refused) < maxRefusedKept {
				c.refused = append(c.refused, err)
			}
		}
	}
	c.owed = nil
	return nil
}

// checkRelease is the *ReleaseError of the answer to the release of ids,
// nil when every reference was released.
func checkRelease(raw []byte, ids []uint64) error {
	if err := replyError(raw, false); err != nil {
		return &ReleaseError{IDs: ids, Err: err}
	}
	n, err := releasedOf(raw)
	if err != nil {
		return &ReleaseError{IDs: ids, Err: err}
	}
	if n != len(ids) {
		return &ReleaseError{IDs: ids, Released: n}
	}
	return nil
}

package coord

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// hasSender sends one Has request to a peer (its PeerClient.Has).
type hasSender func(ctx context.Context, req *kvringv1.HasRequest, opts ...grpc.CallOption) (*kvringv1.HasResponse, error)

// hasCoalescer merges concurrent Has requests to the same peer into one
// call, so a busy coordinator sends one call per peer per round trip and
// pays gRPC's per-call work once for all of them. It starts no goroutine:
// the first caller for an idle peer sends its request at once (an idle
// system waits for nothing more than today); callers that arrive while a
// call to that peer is in flight queue; when the call returns, its sender
// picks a batch of the queue and wakes one of the batch (the leader) to send
// it as one HasRequest and hand each its share of the answer, and so on
// until the queue is empty. Requests that pin go alone at once; pickBatch
// says which queued requests share a call, which go alone at once, and
// which wait for the next call. The Coordinator owns it; safe for
// concurrent use.
type hasCoalescer struct {
	off      bool          // every request goes alone (Config.CoalesceHas false)
	maxBatch int           // the most ids one merged call carries
	timeout  time.Duration // PeerTimeout: bounds a merged call
	// merged counts the requests sent in a call with others (may be nil).
	merged interface{ Add(float64) }

	mu    sync.Mutex
	lanes map[string]*hasLane // peer address → its lane, while a call to it is in flight
}

// hasLane is one peer's queue: requests waiting for the call in flight.
type hasLane struct{ queue []*hasWait }

// hasWait is one caller's request. The coalescer sets role (and a
// leader's batch) under its mutex when it takes the request off the queue;
// whoever answers sets resp and err before it sends on wake.
type hasWait struct {
	ctx   context.Context
	req   *kvringv1.HasRequest
	send  hasSender
	wake  chan struct{} // cap 1: sent on once, when it is to send or its answer is in
	role  hasRole
	batch []*hasWait // the leader's batch, in request order (the leader among them)
	resp  *kvringv1.HasResponse
	err   error
}

// hasRole is what a woken caller does.
type hasRole int

const (
	roleAnswered hasRole = iota + 1 // resp and err are its answer
	roleLead                        // send batch, answer its members, then pick the next batch
	roleAlone                       // send its own request now (it cannot share the batch)
)

func newHasCoalescer(maxBatch int, timeout time.Duration, merged interface{ Add(float64) }) *hasCoalescer {
	return &hasCoalescer{maxBatch: maxBatch, timeout: timeout, merged: merged, lanes: make(map[string]*hasLane)}
}

// has sends req to the peer at addr through send, merged with concurrent
// requests to the same peer when it can share a call (no pin), and returns
// its own answer: held and staging for its ids, spread widths for its
// groups, the peer's epoch, load and lease time. It blocks until the answer,
// for at most PeerTimeout in all (queued and sent), or until ctx ends, which
// ends the wait with ctx's error without ending a call other callers share.
// The one caller that sends a merged call for the others waits for it all
// the same: until it returns, at most until the latest deadline among them.
func (co *hasCoalescer) has(ctx context.Context, addr string, send hasSender, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	if co.off || req.GetPin() != nil {
		return co.sendAlone(ctx, send, req)
	}
	ctx, cancel := context.WithTimeout(ctx, co.timeout) // the wait in the queue counts
	defer cancel()
	co.mu.Lock()
	l := co.lanes[addr]
	if l == nil {
		co.lanes[addr] = &hasLane{}
		co.mu.Unlock()
		resp, err := send(ctx, req)
		co.next(addr)
		return resp, err
	}
	w := &hasWait{ctx: ctx, req: req, send: send, wake: make(chan struct{}, 1)}
	l.queue = append(l.queue, w)
	co.mu.Unlock()
	return co.wait(addr, l, w)
}

// wait blocks until w is woken, or ctx ends, and plays the role it is given.
func (co *hasCoalescer) wait(addr string, l *hasLane, w *hasWait) (*kvringv1.HasResponse, error) {
	select {
	case <-w.wake:
	case <-w.ctx.Done():
		co.mu.Lock()
		l.drop(w)
		role := w.role
		co.mu.Unlock()
		if role != roleLead { // left the queue, or its answer comes to nobody
			return nil, w.ctx.Err()
		}
		<-w.wake // the leader sends for the others all the same
	}
	switch w.role {
	case roleAlone:
		return w.send(w.ctx, w.req) // w.ctx is bounded by PeerTimeout
	case roleLead:
		co.lead(w)
		co.next(addr)
	}
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	return w.resp, w.err
}

// sendAlone sends one request on its own, bounded by PeerTimeout (or ctx's
// deadline, if sooner), as a Has call went before calls were merged.
func (co *hasCoalescer) sendAlone(ctx context.Context, send hasSender, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	pctx, cancel := context.WithTimeout(ctx, co.timeout)
	defer cancel()
	return send(pctx, req)
}

// lead sends the leader's batch as one call and answers each member
// (itself included), bounded by the longest remaining deadline of the
// batch and PeerTimeout, and not by one member giving up. A batch of one
// is sent as that request alone.
func (co *hasCoalescer) lead(w *hasWait) {
	batch := w.batch
	if len(batch) == 1 {
		w.resp, w.err = w.send(w.ctx, w.req) // w.ctx is bounded by PeerTimeout
		return
	}
	ctx, cancel := co.batchCtx(w.ctx, batch)
	defer cancel()
	resp, err := w.send(ctx, mergeHas(batch))
	if co.merged != nil {
		co.merged.Add(float64(len(batch)))
	}
	splitHas(batch, resp, err)
	for _, m := range batch {
		if m != w {
			m.wake <- struct{}{} // its role was set when the batch was picked
		}
	}
}

// batchCtx is the context of a merged call: ctx's values, none of its
// members' cancellation, and the latest of their deadlines (each at most
// PeerTimeout after its caller came), capped by PeerTimeout.
func (co *hasCoalescer) batchCtx(ctx context.Context, batch []*hasWait) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	var latest time.Time
	for _, m := range batch {
		d, ok := m.ctx.Deadline()
		if !ok {
			return context.WithTimeout(base, co.timeout)
		}
		if d.After(latest) {
			latest = d
		}
	}
	dctx, cancelD := context.WithDeadline(base, latest)
	tctx, cancelT := context.WithTimeout(dctx, co.timeout)
	return tctx, func() { cancelT(); cancelD() }
}

// next runs after a call to the peer at addr returned: it answers queued
// callers whose ctx ended, picks the next batch and wakes its leader (and
// the callers that cannot share it, to send alone), or forgets the lane
// when nobody waits. It never blocks beyond the mutex.
func (co *hasCoalescer) next(addr string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	l := co.lanes[addr]
	live := l.queue[:0]
	for _, w := range l.queue {
		if w.ctx.Err() != nil {
			w.role = roleAnswered // its wait returns its ctx's error
			w.wake <- struct{}{}
			continue
		}
		live = append(live, w)
	}
	clear(l.queue[len(live):])
	l.queue = live
	if len(l.queue) == 0 {
		delete(co.lanes, addr)
		return
	}
	batch, alone, rest := pickBatch(l.queue, co.maxBatch)
	l.queue = rest
	for _, w := range alone {
		w.role = roleAlone
		w.wake <- struct{}{}
	}
	for _, w := range batch {
		w.role = roleAnswered // woken by the leader once answered
	}
	leader := latestDeadline(batch)
	leader.role, leader.batch = roleLead, batch
	leader.wake <- struct{}{}
}

// drop removes w from the queue if it is still there.
func (l *hasLane) drop(w *hasWait) {
	for i, q := range l.queue {
		if q == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			return
		}
	}
}

// latestDeadline is the member of batch whose ctx ends last (the least
// likely to give up while it sends for the others).
func latestDeadline(batch []*hasWait) *hasWait {
	best := batch[0]
	bd, bok := best.ctx.Deadline()
	for _, w := range batch[1:] {
		d, ok := w.ctx.Deadline()
		if bok && (!ok || d.After(bd)) {
			best, bd, bok = w, d, ok
		}
	}
	return best
}

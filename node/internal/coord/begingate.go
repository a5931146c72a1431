package coord

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kvring/kvring/transfer"
)

// DefaultMaxAwaitingBegin is the usual Config.MaxAwaitingBegin: far more
// puts than an engine opens at once (each sends its begin message as soon
// as its stream opens), far fewer than a flood of streams that never begin.
const DefaultMaxAwaitingBegin = 64

// errTooManyAwaitingBegin ends a put stream of a client that kept
// MaxAwaitingBegin other streams waiting for their begin message until the
// stream's begin deadline.
var errTooManyAwaitingBegin = fmt.Errorf("%w: too many puts of this client are waiting for their begin message",
	transfer.ErrResourceExhausted)

// beginGate bounds, per client, the put streams whose begin message the
// coordinator reads at once. A stream past a client's bound waits, holding
// only its handler, for one of that client's readers to end (its begin came
// or it was ended), first come first served, until its own begin deadline;
// then it is refused (errTooManyAwaitingBegin). An engine's streams send
// their begin as soon as they open, so they pass at once; a flood of
// streams that never begin costs one reader per bound, not one per stream.
// Safe for concurrent use; the zero value with max 0 admits every stream.
type beginGate struct {
	max     int
	mu      sync.Mutex
	clients map[string]*beginQueue
}

// beginQueue is one client's readers and waiting streams.
type beginQueue struct {
	reading int
	waiting []chan struct{} // closed when its stream is handed a reader's slot
}

// enter takes a reading slot for client, waiting for one until expire
// fires or ctx ends; on success the caller must call the returned leave
// once its stream's begin phase is over.
func (g *beginGate) enter(ctx context.Context, client string, expire <-chan time.Time) (leave func(), err error) {
	if g.max <= 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	if g.clients == nil {
		g.clients = map[string]*beginQueue{}
	}
	q := g.clients[client]
	if q == nil {
		q = &beginQueue{}
		g.clients[client] = q
	}
	if q.reading < g.max && len(q.waiting) == 0 {
		q.reading++
		g.mu.Unlock()
		return g.leaver(client, q), nil
	}
	turn := make(chan struct{})
	q.waiting = append(q.waiting, turn)
	g.mu.Unlock()
	select {
	case <-turn:
		return g.leaver(client, q), nil
	case <-expire:
		err = errTooManyAwaitingBegin
	case <-ctx.Done():
		err = transfer.RecvError(ctx.Err())
	}
	g.giveUp(client, q, turn)
	return nil, err
}

// giveUp takes a stream that stops waiting (its deadline passed, or its
// call ended) out of q's waiting list; one that was handed a slot as it
// gave up passes the slot on, since it will not read.
func (g *beginGate) giveUp(client string, q *beginQueue, turn chan struct{}) {
	g.mu.Lock()
	i := slices.Index(q.waiting, turn)
	if i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
	}
	g.mu.Unlock()
	if i < 0 {
		g.leaver(client, q)()
	}
}

// leaver returns the function that frees one reading slot of client: it
// is handed to the longest waiting stream, if any, else the client's entry
// goes when nothing is left in it.
func (g *beginGate) leaver(client string, q *beginQueue) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(q.waiting) > 0 {
				close(q.waiting[0])
				q.waiting = slices.Delete(q.waiting, 0, 1)
				return
			}
			q.reading--
			if q.reading == 0 {
				delete(g.clients, client)
			}
		})
	}
}

// beginDeadline is how long a put stream may take to send its begin
// message: IdleTimeout plus up to half of it again, at random, so that
// streams opened together (a flood re-opened the moment the node ended it)
// are not all ended, and opened again, in the same instant.
func beginDeadline(idle time.Duration) time.Duration {
	if idle <= 0 {
		return 0
	}
	return idle + rand.N(idle/2+1)
}

package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// Routing: with a ring view (topology.go), Put and Get split a batch by each id's primary owner and send every
// share straight to that owner, which coordinates it itself, over one connection per owner, in parallel; the
// answers are merged back into the caller's order. The share of the node the client is connected to goes over
// the main connection. A Lookup goes whole to the primary owner of its first id's placement key
// (lookup_route.go).
//
// Fallback, per share: when the owner cannot take it (unreachable, no answer within the owner's answer timeout,
// deadline or cancellation not caused by the caller, the namespace unknown there, Topology/Put/Get not
// implemented) the whole share is sent again over the main connection, where any node coordinates it. Resending a
// put is safe: chunks are immutable, and a chunk the owner stored meanwhile answers already_held. Any other error
// (bad input, schema mismatch, the caller's deadline) fails the call as it would without routing, and then no
// result is reported at all; a put with bad input is sent whole over the main connection, so that the error names
// the field by its position in the caller's batch. A chunk is only ever reported stored, or found, because a node said so. Get also asks
// the main connection again for each chunk an owner reported missing.

// errNoAnswer marks an owner that did not answer a call's first message within the answer timeout.
var errNoAnswer = errors.New("owner did not answer in time")

// share is the part of a batch that goes to one node.
type share struct {
	owner ring.Member // the primary owner of every id of the share; zero for the main share
	main  bool        // goes over the main connection
	idx   []int       // positions in the caller's batch, ascending
}

// split groups the positions of a batch of n ids (id(i) is the i-th) by primary owner, in order of first
// appearance; for a read (reads true) an id of a group known to be spread goes to a member of the group's
// spread set instead (spread.go). Ids owned by the node cc is connected to, or by a member without an address,
// form the main share. It returns nil when the whole batch goes over cc anyway: routing disabled, no view, or
// one share for cc.
func (r *router) split(cc *grpc.ClientConn, namespace string, n int, id func(int) []byte, reads bool) []share {
	if r == nil {
		return nil
	}
	t := r.view.Load()
	if t == nil || t.ring == nil || t.ring.Len() == 0 {
		return nil
	}
	self := ""
	if t.via == cc {
		self = t.self // else the connection moved: the share of the node connected now goes over a pool connection
	}
	const mainKey = "\x00main"
	pos := map[string]int{}
	var shares []share
	var picked map[string]ring.Member
	var now time.Time
	if reads {
		picked, now = map[string]ring.Member{}, time.Now()
	}
	for i := range n {
		var p ring.Member
		var err error
		if reads {
			p, err = r.readMember(t.ring, namespace, id(i), picked, now)
		} else {
			p, err = t.ring.Primary(namespace, id(i))
		}
		if err != nil {
			return nil
		}
		key := p.ID
		if p.ID == self || p.Addr == "" {
			key = mainKey
		}
		k, ok := pos[key]
		if !ok {
			k = len(shares)
			pos[key] = k
			s := share{owner: p, main: key == mainKey}
			if s.main {
				s.owner = ring.Member{}
			}
			shares = append(shares, s)
		}
		shares[k].idx = append(shares[k].idx, i)
	}
	if len(shares) == 1 && shares[0].main {
		return nil
	}
	return shares
}

// runShares runs call for every share in parallel, each on its owner's connection (cc for the main share) and,
// when the owner cannot take it (ownerFailed), once more on cc. call must publish its results only when it
// returns nil. The first error of a share that failed for good cancels the others and is returned.
func (c *Client) runShares(ctx context.Context, cc *grpc.ClientConn, shares []share,
	call func(ctx context.Context, cc *grpc.ClientConn, s share) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	run := func(s share) {
		if err := c.runShare(ctx, cc, s, call); err != nil {
			once.Do(func() { first = err })
			cancel()
		}
	}
	for _, s := range shares[1:] {
		wg.Go(func() { run(s) })
	}
	run(shares[0])
	wg.Wait()
	return first
}

// runShare runs call for one share on its owner, then on cc if the owner could not take it.
func (c *Client) runShare(ctx context.Context, cc *grpc.ClientConn, s share,
	call func(ctx context.Context, cc *grpc.ClientConn, s share) error) error {
	if s.main {
		return call(ctx, cc, s)
	}
	occ, err := c.route.ownerConn(s.owner.Addr)
	if err == nil {
		if err = call(ctx, occ, s); err == nil || !ownerFailed(ctx, err) {
			return err
		}
	}
	c.route.log.Debug("kvring owner cannot take its share; sending it through the connected node",
		"owner", s.owner.ID, "addr", s.owner.Addr, "chunks", len(s.idx), "err", err)
	return call(ctx, cc, s)
}

// ownerFailed reports whether a share's call failed because of the owner or the way to it, so that the main
// connection may still serve it. It is false once ctx (the caller's call) is done.
func ownerFailed(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return errors.Is(err, transfer.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.Is(err, transfer.ErrUnknownNamespace) ||
		transfer.Code(err) == codes.Unimplemented
}

// putRouted writes chunks through their primary owners (see the top of this file), or all through cc without a
// ring view. Same contract as put.
func (c *Client) putRouted(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, chunks []Chunk,
	refs []*kvringv1.ChunkRef, keys [][]byte) ([]PutResult, error) {
	shares := c.route.split(cc, ref.GetName(), len(refs), func(i int) []byte {
		if keys == nil {
			return refs[i].GetId()
		}
		return keys[i]
	}, false)
	if shares == nil {
		return c.put(ctx, cc, ref, chunks, refs, keys)
	}
	out := make([]PutResult, len(chunks))
	err := c.runShares(ctx, cc, shares, func(ctx context.Context, scc *grpc.ClientConn, s share) error {
		res, err := c.put(ctx, scc, ref, pick(chunks, s.idx), pick(refs, s.idx), pickKeys(keys, s.idx))
		if err != nil {
			return err
		}
		for k, i := range s.idx {
			out[i] = res[k]
		}
		return nil
	})
	if errors.Is(err, transfer.ErrInvalidArgument) {
		// The owner named the bad field by its position in the share: let one node name it by the caller's.
		// Resending is safe (chunks other shares stored answer already_held), and bad input is rare.
		return c.put(ctx, cc, ref, chunks, refs, keys)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// getRouted reads chunks from their primary owners (see the top of this file), or all through cc without a ring
// view. Same contract as get.
func (c *Client) getRouted(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, a getArgs) ([]GetResult, error) {
	shares := c.route.split(cc, ref.GetName(), len(a.raw), func(i int) []byte { return keyAt(a.keys, a.raw, i) }, true)
	if shares == nil {
		return c.get(ctx, cc, ref, a)
	}
	out := make([]GetResult, len(a.ids))
	err := c.runShares(ctx, cc, shares, func(ctx context.Context, scc *grpc.ClientConn, s share) error {
		res, err := c.get(ctx, scc, ref, a.pick(s.idx))
		if err != nil {
			return err
		}
		if scc != cc {
			c.retryMisses(ctx, cc, ref, a, s.idx, res)
		}
		for k, i := range s.idx {
			out[i] = res[k]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// retryMisses asks cc again for the chunks of a share (positions idx of a) that its owner did not return, and
// puts what cc finds into res. The owner's misses stay when cc misses too or fails: they are true answers.
func (c *Client) retryMisses(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, a getArgs,
	idx []int, res []GetResult) {
	var miss []int // positions in res
	for k := range res {
		if !res[k].Found {
			miss = append(miss, k)
		}
	}
	if len(miss) == 0 {
		return
	}
	at := make([]int, len(miss)) // positions in a
	for j, k := range miss {
		at[j] = idx[k]
	}
	again, err := c.get(ctx, cc, ref, a.pick(at))
	if err != nil {
		return
	}
	for j, k := range miss {
		if again[j].Found {
			res[k] = again[j]
		}
	}
}

// pick returns s[i] for every i in idx, in order.
func pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = s[i]
	}
	return out
}

// ownerDialOptions returns the options of the connections to owners (router.pool): the main connection's, gRPC's
// reconnection paced like the main connection's, and answerWithin(answerTimeout), so that a stream on them must
// get a first answer within the answer timeout (a node that hangs is skipped, like one that is down).
func ownerDialOptions(cn *conn, answerTimeout time.Duration) []grpc.DialOption {
	return append(slices.Clone(cn.dialOpts),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: cn.cfg.DialTimeout, Backoff: grpcbackoff.Config{
			BaseDelay: cn.cfg.BackoffBase, Multiplier: 2, Jitter: cn.cfg.Jitter, MaxDelay: cn.cfg.BackoffMax}}),
		grpc.WithChainStreamInterceptor(answerWithin(answerTimeout)))
}

// answerWithin makes a stream fail with Unavailable (saying errNoAnswer) when its first message does not arrive
// within d of its start, connection set-up included: a node that hangs is treated like one that is down.
func answerWithin(d time.Duration) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer,
		opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, cancel := context.WithCancel(ctx)
		s := &answerStream{cancel: cancel, addr: cc.Target(), d: d}
		s.timer = time.AfterFunc(d, func() {
			s.silent.Store(true)
			cancel()
		})
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			s.timer.Stop()
			cancel()
			return nil, s.explain(err)
		}
		s.ClientStream = cs
		return s, nil
	}
}

// answerStream is a stream under answerWithin's timer.
type answerStream struct {
	grpc.ClientStream
	cancel   context.CancelFunc
	timer    *time.Timer
	silent   atomic.Bool // the timer fired
	answered bool        // a message arrived; only RecvMsg touches it
	addr     string
	d        time.Duration
}

func (s *answerStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if !s.answered {
		s.answered = true
		s.timer.Stop()
	}
	if err != nil {
		s.cancel()
		return s.explain(err)
	}
	return nil
}

// explain turns the cancellation caused by the timer into Unavailable.
func (s *answerStream) explain(err error) error {
	if s.silent.Load() && transfer.Code(err) == codes.Canceled {
		return withCode(fmt.Errorf("%w: %s: %w within %s", transfer.ErrUnavailable, s.addr, errNoAnswer, s.d))
	}
	return err
}

package coord

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"

	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// broadcast offers a namespace record to every other member, in parallel,
// within BroadcastTimeout, and returns the record that wins over it, if any
// member holds one (namespace.Broadcast).
func (c *Coordinator) broadcast(ctx context.Context, rec *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord {
	r := c.cfg.Ring()
	if r == nil {
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, c.cfg.BroadcastTimeout)
	defer cancel()
	var mu sync.Mutex
	var winner *kvringv1.NamespaceRecord
	var wg sync.WaitGroup
	for _, m := range r.Members() {
		if m.ID == c.cfg.Self {
			continue
		}
		wg.Go(func() {
			held := c.offer(ctx, bctx, m, rec)
			if held == nil {
				return
			}
			mu.Lock()
			if winner == nil || namespace.Wins(held, winner) {
				winner = held
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return winner
}

// OfferNamespace offers rec, a record this node changed (its share), to
// every other member, in parallel, within BroadcastTimeout; a member that
// does not answer learns it when it next syncs. Blocks.
func (c *Coordinator) OfferNamespace(ctx context.Context, rec *kvringv1.NamespaceRecord) {
	c.broadcast(ctx, rec)
}

// taught runs call, and runs it once more after teaching member m the
// namespace name when m answered that it does not know it (it missed the
// registration). It returns the last call's error.
func (c *Coordinator) taught(ctx context.Context, m ring.Member, name string, call func() error) error {
	err := call()
	if errors.Is(transfer.FromStatus(err), transfer.ErrUnknownNamespace) && c.teach(ctx, m, name) {
		err = call()
	}
	return err
}

// offer sends rec to member m under bctx and returns m's record when it
// wins over rec. ctx is the engine's call, for the outage log.
// teach offers this node's record of namespace name to member m, which
// answered that it does not know it (it missed the registration's broadcast
// and the start-up sync), and reports whether there was a record to offer:
// then asking m again is worth it. Bounded by BroadcastTimeout.
func (c *Coordinator) teach(ctx context.Context, m ring.Member, name string) bool {
	rec := c.reg.Get(name)
	if rec == nil || m.ID == c.cfg.Self {
		return false
	}
	bctx, cancel := context.WithTimeout(ctx, c.cfg.BroadcastTimeout)
	defer cancel()
	c.offer(ctx, bctx, m, rec)
	return true
}

func (c *Coordinator) offer(ctx, bctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord {
	pc, err := c.peer(m)
	if err != nil {
		return nil
	}
	resp, err := pc.PutNamespace(bctx, &kvringv1.PutNamespaceRequest{Caller: c.caller(), Namespace: rec})
	c.peers.note(ctx, m, err) // an unreachable peer is logged once per outage, not per namespace
	if err != nil {
		if !transfer.Unreachable(err) {
			c.log.Warn("cannot tell a member about a namespace", "node", m.ID, "namespace", rec.GetName(), "err", err)
		}
		return nil
	}
	if held := resp.GetNamespace(); held != nil && !resp.GetAccepted() && namespace.Wins(held, rec) {
		return held
	}
	return nil
}

// SyncNamespaces learns the namespaces registered before this node joined,
// from the first other member that answers, within CommitTimeout or until
// ctx ends. It logs what it learned.
func (c *Coordinator) SyncNamespaces(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	var others []ring.Member
	var listers []namespace.Lister
	for _, m := range c.cfg.Ring().Members() {
		if m.ID == c.cfg.Self {
			continue
		}
		others = append(others, m)
		listers = append(listers, func(ctx context.Context) ([]*kvringv1.NamespaceRecord, error) {
			pc, err := c.peer(m)
			if err != nil {
				return nil, err
			}
			resp, err := pc.ListNamespaces(ctx, &kvringv1.ListNamespacesRequest{Caller: c.caller()})
			return resp.GetNamespaces(), err
		})
	}
	if n, from := c.reg.SyncFrom(ctx, listers); from >= 0 {
		c.log.Info("learned namespaces from a peer", "node", others[from].ID, "namespaces", n)
	}
}

// learnPeers is how many other members a check of an unknown namespace asks
// (learnNamespace).
const learnPeers = 3

// learnNamespace asks a few other members (up to learnPeers, from a place
// in the member list the name decides, so the same ones for one name) for their
// record of namespace name, in parallel within BroadcastTimeout, and merges
// what they hold. A read of a namespace this node missed the registration
// of (it was out of the ring then) so finds it; a misspelt name costs a
// few calls. It reports whether this node knows the name afterwards.
func (c *Coordinator) learnNamespace(ctx context.Context, name string) bool {
	r := c.cfg.Ring()
	if r == nil {
		return false
	}
	bctx, cancel := context.WithTimeout(ctx, c.cfg.BroadcastTimeout)
	defer cancel()
	var wg sync.WaitGroup
	members := r.Members()
	h := fnv.New32a()
	h.Write([]byte(name))
	start, asked := int(h.Sum32()%uint32(max(1, len(members)))), 0
	for i := range members {
		m := members[(start+i)%len(members)]
		if m.ID == c.cfg.Self || asked == learnPeers {
			continue
		}
		asked++
		wg.Go(func() {
			pc, err := c.peer(m)
			if err != nil {
				return
			}
			resp, err := pc.ListNamespaces(bctx, &kvringv1.ListNamespacesRequest{Caller: c.caller(), Names: []string{name}})
			c.peers.note(ctx, m, err)
			for _, rec := range resp.GetNamespaces() {
				if rec.GetName() == name {
					_, _, _ = c.reg.MergePeer(rec) // a record that fails its checks is not taken
				}
			}
		})
	}
	wg.Wait()
	return c.reg.Get(name) != nil
}

// RegisterNamespace registers the namespace req names, or with existing
// only checks it against the record a member holds (a read: nothing is
// registered; an unknown name is transfer.ErrUnknownNamespace). It returns
// the record and whether this call created it; errors are domain errors
// (namespace.ErrTooManyNamespaces past the registry's limit). Blocks while
// the registration is broadcast.
func (c *Coordinator) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest, existing bool) (*kvringv1.NamespaceRecord, bool, error) {
	reg := namespace.Registration{Name: req.GetName(), Schema: req.GetSchema(),
		Replicas: req.GetReplicationFactor(), MinReplicas: req.GetMinReplicas(), Self: c.cfg.Self, Now: c.cfg.Now()}
	if existing {
		rec, err := c.reg.Check(reg, c.cfg.Defaults)
		if errors.Is(err, transfer.ErrUnknownNamespace) && c.learnNamespace(ctx, reg.Name) {
			rec, err = c.reg.Check(reg, c.cfg.Defaults) // it was registered while this node was out of the ring
		}
		return rec, false, err
	}
	return c.reg.Register(ctx, reg, c.cfg.Defaults, c.broadcast)
}

// Register is RegisterNamespace answered as the Cache service answers it
// (the ring epoch, the record, whether it was created, the node's limits),
// for an in-process caller (the local socket): with existing (a client's
// read), only checks. Errors are domain errors (transfer's sentinels), which
// the caller maps to its own protocol.
func (c *Coordinator) Register(ctx context.Context, req *kvringv1.RegisterNamespaceRequest, existing bool) (*kvringv1.RegisterNamespaceResponse, error) {
	rec, created, err := c.RegisterNamespace(ctx, req, existing)
	if err != nil {
		return nil, err
	}
	return &kvringv1.RegisterNamespaceResponse{Epoch: c.epoch(), Namespace: rec, Created: created, Limits: c.cfg.Limits}, nil
}

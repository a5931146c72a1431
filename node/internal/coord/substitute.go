package coord

import (
	"context"
	"slices"

	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// Writes while an owner is unreachable (down, not yet declared dead by
// gossip): the chunks of an owner whose prepare failed because it could not
// be reached go to the next member in their key's ring order that is not
// already an owner of theirs, does not drain, is not known to be down and
// is not suspected by gossip (suspect.go) —
// the member gossip will make their owner once it declares the dead one
// dead. Their results name the real holders. Reads find them there
// meanwhile: readOwners adds the same substitutes for owners known down.

// substitute re-places the chunks of owners that could not be reached and
// prepares the new shares; one round (a substitute that fails too leaves
// its chunks failed).
func (tx *writeTx) substitute(ctx context.Context, rg *ring.Ring) {
	subs := map[string]*ownerShare{}
	for i := range tx.chunks {
		for k, s := range tx.owners[i] {
			if s.failed == nil || !transfer.Unreachable(s.cause) {
				continue
			}
			m, ok := tx.c.substituteFor(rg, tx.ref.GetName(), tx.keys[i], tx.owners[i])
			if !ok {
				continue
			}
			sub := subs[m.ID]
			if sub == nil {
				sub = newOwnerShare(m, tx.c.cfg.Self)
				subs[m.ID] = sub
				tx.shares[m.ID+" in place of "+s.member.ID] = sub
			}
			sub.add(uint32(i), tx.chunks[i])
			tx.owners[i][k] = sub
		}
	}
	if len(subs) == 0 {
		return
	}
	tx.prepareShares(ctx, subs)
}

// substituteFor returns the first member in key's ring order that is none
// of owners, does not drain, is not known to be down and is not suspected.
func (c *Coordinator) substituteFor(rg *ring.Ring, ns string, key []byte, owners []*ownerShare) (ring.Member, bool) {
	for _, m := range rg.Owners(ns, key, rg.Len()) {
		taken := slices.ContainsFunc(owners, func(s *ownerShare) bool { return s.member.ID == m.ID })
		if taken || (c.cfg.Draining != nil && c.cfg.Draining(m.ID)) || c.peers.isDown(m.ID) || c.suspected(m.ID) {
			continue
		}
		return m, true
	}
	return ring.Member{}, false
}

package namespace

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// A namespace's share of each node's memory travels in its record
// (NamespaceRecord.share), so that every member, also one that joins after
// the share was set, enforces it: the record is what a registration
// broadcasts, a joining node syncs and a node keeps in its catalog. The
// registry only carries shares; the node applies them to its store
// (RegistryConfig.ShareChanged).

// sameRegistration reports whether a and b are records of one
// registration (neither wins over the other): they differ at most in their
// shares.
func sameRegistration(a, b *kvringv1.NamespaceRecord) bool { return !Wins(a, b) && !Wins(b, a) }

// shareNewer reports whether a's share was set after b's: later
// set_unix_ms, then the greater set_by. A record without a share is older
// than any with one.
func shareNewer(a, b *kvringv1.NamespaceRecord) bool {
	sa, sb := a.GetShare(), b.GetShare()
	switch {
	case sa == nil:
		return false
	case sb == nil:
		return true
	case sa.GetSetUnixMs() != sb.GetSetUnixMs():
		return sa.GetSetUnixMs() > sb.GetSetUnixMs()
	}
	return sa.GetSetBy() > sb.GetSetBy()
}

// SameShare reports whether two shares set the same bounds (whenever and
// wherever they were set); nil is no bound.
func SameShare(a, b *kvringv1.NamespaceShare) bool {
	return proto.Equal(a.GetGuarantee(), b.GetGuarantee()) && proto.Equal(a.GetCap(), b.GetCap())
}

// SetShare sets the share of the registered namespace name to sh (at
// sh.set_unix_ms, by sh.set_by) and returns the record that now carries
// it, to be offered to the other members; changed is false when the record
// already carried the same bounds (nothing is written, and there is
// nothing to offer). An unknown name is ErrUnknownNamespace. It does not
// call ShareChanged: the caller applied the share already.
func (r *Registry) SetShare(name string, sh *kvringv1.NamespaceShare) (rec *kvringv1.NamespaceRecord, changed bool, err error) {
	if err := validateShare(name, sh, r.cfg.Now()); err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.recs[name]
	if cur == nil {
		return nil, false, fmt.Errorf("%w: namespace %q is not registered on this node", transfer.ErrUnknownNamespace, name)
	}
	if cur.GetShare() != nil && SameShare(cur.GetShare(), sh) {
		return cur, false, nil
	}
	rec = proto.CloneOf(cur)
	rec.Share = proto.CloneOf(sh)
	r.recs[name] = rec
	r.save(rec)
	return rec, true, nil
}

// validateShare checks a share a record carries: amounts of 0 to 100 % or
// a number of bytes, not both, set after 2020 and not in the future.
func validateShare(name string, sh *kvringv1.NamespaceShare, now time.Time) error {
	if sh == nil {
		return nil
	}
	for what, a := range map[string]*kvringv1.ShareAmount{"guarantee": sh.GetGuarantee(), "cap": sh.GetCap()} {
		p := a.GetPercent()
		if p < 0 || p > 100 || math.IsNaN(p) || (p > 0 && a.GetBytes() > 0) {
			return fmt.Errorf("%w: namespace record %q: share %s must be 0 to 100 %% or a number of bytes, not both",
				transfer.ErrInvalidArgument, name, what)
		}
	}
	if at := sh.GetSetUnixMs(); at < minCreatedUnixMs || at > now.Add(maxClockSkew).UnixMilli() {
		return fmt.Errorf("%w: namespace record %q: share set at %d ms, not between 2020 and now", transfer.ErrInvalidArgument, name, at)
	}
	return nil
}

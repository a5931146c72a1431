package services

import (
	"errors"
	"log/slog"
	"math"

	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// shareFromProto is the store's form of a share a namespace record carries.
func shareFromProto(sh *kvringv1.NamespaceShare) store.Share {
	amount := func(a *kvringv1.ShareAmount) store.Amount {
		return store.Amount{Bytes: int64(min(a.GetBytes(), math.MaxInt64)), Percent: a.GetPercent()}
	}
	return store.Share{Guarantee: amount(sh.GetGuarantee()), Cap: amount(sh.GetCap())}
}

// enforceShare sets the share rec carries (set on another member, or kept
// in the catalog) on st. A share this node cannot keep (its guarantees
// would exceed its limit, or it evicts by tinylfu) is logged and left out:
// the record still carries it, and `kvring namespaces` shows the members
// differ. Does not block on the disk.
func enforceShare(st *store.Store, rec *kvringv1.NamespaceRecord, log *slog.Logger) {
	sn := namespace.StoreName(rec.GetName(), rec.GetFingerprint())
	if err := st.SetShare(sn, shareFromProto(rec.GetShare())); err != nil && !errors.Is(err, store.ErrClosed) {
		log.Warn("cannot enforce the share of a namespace set on another member", "namespace", rec.GetName(),
			"set_by", rec.GetShare().GetSetBy(), "err", err)
	}
}

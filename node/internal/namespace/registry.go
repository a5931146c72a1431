package namespace

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// MaxNameLen leaves room in the store's namespace key for the
// fingerprint suffix (store.MaxNamespaceLen).
const MaxNameLen = store.MaxNamespaceLen - 17

// Registry holds the namespaces this node knows: name → record. Safe for
// concurrent use. Records are not persisted: after a restart clients
// register again (the SDK does so when told the namespace is unknown), and a
// joining node learns them from its peers.
type Registry struct {
	mu   sync.RWMutex
	recs map[string]*kvringv1.NamespaceRecord
}

func NewRegistry() *Registry {
	return &Registry{recs: make(map[string]*kvringv1.NamespaceRecord)}
}

// Get returns the record of name, or nil.
func (r *Registry) Get(name string) *kvringv1.NamespaceRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.recs[name]
}

// List returns every record, sorted by name.
func (r *Registry) List() []*kvringv1.NamespaceRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*kvringv1.NamespaceRecord, 0, len(r.recs))
	for _, rec := range r.recs {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b *kvringv1.NamespaceRecord) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// Wins reports whether record a takes precedence over b for the same name:
// the earlier registration wins, then the lower fingerprint.
func Wins(a, b *kvringv1.NamespaceRecord) bool {
	if a.GetCreatedUnixMs() != b.GetCreatedUnixMs() {
		return a.GetCreatedUnixMs() < b.GetCreatedUnixMs()
	}
	return bytes.Compare(a.GetFingerprint(), b.GetFingerprint()) < 0
}

// Merge offers a record (from a client registration or a peer) and returns
// the record this node holds for the name afterwards, and whether the offer
// was taken.
func (r *Registry) Merge(rec *kvringv1.NamespaceRecord) (*kvringv1.NamespaceRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.recs[rec.GetName()]
	if cur != nil && (proto.Equal(cur, rec) || !Wins(rec, cur)) {
		return cur, proto.Equal(cur, rec)
	}
	r.recs[rec.GetName()] = rec
	return rec, true
}

// Resolve checks a data call's namespace reference and returns the store
// namespace and the record. Errors are FailedPrecondition-class: the
// namespace is unknown here, or the client's fingerprint is not the
// cluster's.
func (r *Registry) Resolve(ref *kvringv1.NamespaceRef) (string, *kvringv1.NamespaceRecord, error) {
	if ref == nil || ref.GetName() == "" {
		return "", nil, fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument)
	}
	rec := r.Get(ref.GetName())
	if rec == nil {
		return "", nil, fmt.Errorf("%w: namespace %q is not registered on this node: call RegisterNamespace first",
			transfer.ErrUnknownNamespace, ref.GetName())
	}
	if !bytes.Equal(rec.GetFingerprint(), ref.GetFingerprint()) {
		return "", nil, fmt.Errorf("%w: namespace %q: the cluster's schema fingerprint is %x, the client's is %x; "+
			"register again to see which schema fields differ", transfer.ErrSchemaMismatch, ref.GetName(),
			short(rec.GetFingerprint()), short(ref.GetFingerprint()))
	}
	return StoreName(rec.GetName(), rec.GetFingerprint()), rec, nil
}

func short(b []byte) []byte { return b[:min(8, len(b))] }

package namespace

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// MaxNameLen leaves room in the store's namespace key for the
// fingerprint suffix (store.MaxNamespaceLen).
const MaxNameLen = store.MaxNamespaceLen - 17

// Registry holds the namespaces this node knows: name → record. Safe for
// concurrent use. With a Catalog every record taken or deleted is written
// there, and Restore takes them back after a restart, so a full restart of
// the cluster keeps its namespaces; a joining node also learns them from
// its peers.
type Registry struct {
	cfg  RegistryConfig
	mu   sync.RWMutex
	recs map[string]*kvringv1.NamespaceRecord
}

// RegistryConfig bounds what a Registry takes.
type RegistryConfig struct {
	// MaxNamespaces is the most names the registry holds; a new one beyond
	// it is refused (ErrTooManyNamespaces). Default 1024.
	MaxNamespaces int
	// Reserved are names taken even beyond MaxNamespaces: the namespace a
	// Redis-protocol write falls back to when its own cannot be created,
	// which must never be refused for the same reason. Optional.
	Reserved []string
	// MaxReplicas is the largest replication factor a peer's record may
	// carry (the ring's). Default 3.
	MaxReplicas uint32
	// Now is the clock peer records' creation times are checked against.
	// Default time.Now.
	Now func() time.Time
	// Catalog keeps the records across restarts. Optional: nil keeps them
	// in memory only.
	Catalog Catalog
	// ShareChanged is called when Merge takes a record whose share sets
	// other bounds than the record it replaces (a peer's newer setting, or
	// a new registration's), with the record now held, so that the node
	// enforces it. It is called with the registry's lock held, in the
	// order records change: it must not block for long nor call the
	// registry. Optional.
	ShareChanged func(rec *kvringv1.NamespaceRecord)
}

// Catalog keeps namespace records across restarts: the node's store. Its
// methods queue the write and must not block for long; they are called with
// the registry's lock held, in the order the records change.
type Catalog interface {
	SaveNamespaceRecord(name string, rec []byte) error
	DeleteNamespaceRecord(name string) error
}

// ErrTooManyNamespaces: the registry holds MaxNamespaces names already.
var ErrTooManyNamespaces = fmt.Errorf("%w: too many namespaces", transfer.ErrResourceExhausted)

// NewRegistry returns an empty registry with the default limits.
func NewRegistry() *Registry { return NewRegistryWith(RegistryConfig{}) }

// NewRegistryWith returns an empty registry bounded by cfg (zero fields take
// their defaults).
func NewRegistryWith(cfg RegistryConfig) *Registry {
	if cfg.MaxNamespaces <= 0 {
		cfg.MaxNamespaces = 1024
	}
	if cfg.MaxReplicas == 0 {
		cfg.MaxReplicas = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Registry{cfg: cfg, recs: make(map[string]*kvringv1.NamespaceRecord)}
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

// Merge offers a record (from a client registration, or a peer's that
// MergePeer checked) and returns the record this node holds for the name
// afterwards, and whether the offer was taken. Of two records of the same
// registration the one whose share was set later is taken. A new name
// beyond MaxNamespaces is ErrTooManyNamespaces. When the share in force
// changes, ShareChanged is called before Merge returns.
func (r *Registry) Merge(rec *kvringv1.NamespaceRecord) (*kvringv1.NamespaceRecord, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.recs[rec.GetName()]
	switch {
	case cur != nil && proto.Equal(cur, rec):
		return cur, true, nil
	case cur != nil && sameRegistration(cur, rec):
		if !shareNewer(rec, cur) {
			return cur, false, nil
		}
		next := proto.CloneOf(cur) // the registration as this node holds it, with the later share
		next.Share = proto.CloneOf(rec.GetShare())
		rec = next
	case cur != nil && !Wins(rec, cur):
		return cur, false, nil
	case cur == nil && len(r.recs) >= r.cfg.MaxNamespaces && !slices.Contains(r.cfg.Reserved, rec.GetName()):
		return nil, false, fmt.Errorf("%w: this node holds %d namespaces, the most it allows; cannot add %q",
			ErrTooManyNamespaces, len(r.recs), rec.GetName())
	}
	r.recs[rec.GetName()] = rec
	r.save(rec)
	if r.cfg.ShareChanged != nil && !SameShare(cur.GetShare(), rec.GetShare()) {
		r.cfg.ShareChanged(rec)
	}
	return rec, true, nil
}

// save writes rec to the catalog, if any; r.mu is held. A record that
// cannot be written stays in memory: the cluster still knows it, and a
// restarted node learns it from a peer.
func (r *Registry) save(rec *kvringv1.NamespaceRecord) {
	if r.cfg.Catalog == nil {
		return
	}
	b, err := proto.Marshal(rec)
	if err == nil {
		_ = r.cfg.Catalog.SaveNamespaceRecord(rec.GetName(), b) // ErrClosed: the node stops
	}
}

// Delete forgets the record of name and returns it (nil when unknown).
func (r *Registry) Delete(name string) *kvringv1.NamespaceRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recs[name]
	delete(r.recs, name)
	if rec != nil && r.cfg.Catalog != nil {
		_ = r.cfg.Catalog.DeleteNamespaceRecord(name)
	}
	return rec
}

// Restore takes back the records a Catalog kept (name → the bytes save
// wrote), before the node serves: each is checked as a peer's record is
// (ValidateRecord), and one that cannot be read, fails the check or would
// exceed MaxNamespaces is dropped from the catalog and named in dropped
// with the reason. It returns how many it took.
func (r *Registry) Restore(recs map[string][]byte) (restored int, dropped []string) {
	names := slices.Sorted(maps.Keys(recs))
	for _, name := range names {
		rec := new(kvringv1.NamespaceRecord)
		err := proto.Unmarshal(recs[name], rec)
		if err == nil && rec.GetName() != name {
			err = fmt.Errorf("it is the record of %q", rec.GetName())
		}
		if err == nil {
			err = ValidateRecord(rec, r.cfg.MaxReplicas, r.cfg.Now())
		}
		if err == nil {
			r.mu.Lock()
			if len(r.recs) >= r.cfg.MaxNamespaces && r.recs[name] == nil && !slices.Contains(r.cfg.Reserved, name) {
				err = fmt.Errorf("%w: more than %d namespaces", ErrTooManyNamespaces, r.cfg.MaxNamespaces)
			} else {
				r.recs[name] = rec
				restored++
			}
			r.mu.Unlock()
		}
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("%s: %v", name, err))
			if r.cfg.Catalog != nil {
				_ = r.cfg.Catalog.DeleteNamespaceRecord(name)
			}
		}
	}
	return restored, dropped
}

// MergePeer is Merge for a record a peer offers: one that fails
// ValidateRecord is refused.
func (r *Registry) MergePeer(rec *kvringv1.NamespaceRecord) (*kvringv1.NamespaceRecord, bool, error) {
	if err := ValidateRecord(rec, r.cfg.MaxReplicas, r.cfg.Now()); err != nil {
		return nil, false, err
	}
	return r.Merge(rec)
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

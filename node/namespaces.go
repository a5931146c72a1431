package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// maxNamespaceName leaves room in the store's namespace key for the
// fingerprint suffix (store.MaxNamespaceLen).
const maxNamespaceName = store.MaxNamespaceLen - 17

// registry holds the namespaces this node knows: name → record. Safe for
// concurrent use. Records are not persisted: after a restart clients
// register again (the SDK does so when told the namespace is unknown), and a
// joining node learns them from its peers.
type registry struct {
	mu   sync.RWMutex
	recs map[string]*kvringv1.NamespaceRecord
}

func newRegistry() *registry {
	return &registry{recs: make(map[string]*kvringv1.NamespaceRecord)}
}

// schemaFingerprint is SHA-256 over a canonical text form of the schema:
// one "key=value\n" line per field in a fixed order, extra keys sorted.
func schemaFingerprint(s *kvringv1.NamespaceSchema) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "model=%s\ndtype=%s\ntokens_per_chunk=%d\nlayout=%s\nhash_scheme=%s\ntp_rank=%d\ntp_size=%d\n",
		s.GetModel(), s.GetDtype(), s.GetTokensPerChunk(), s.GetLayout(), s.GetHashScheme(), s.GetTpRank(), s.GetTpSize())
	keys := make([]string, 0, len(s.GetExtra()))
	for k := range s.GetExtra() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "extra.%s=%s\n", k, s.GetExtra()[k])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return sum[:]
}

// schemaDiff names the fields in which two schemas differ, for the error a
// mismatched client gets.
func schemaDiff(have, got *kvringv1.NamespaceSchema) string {
	var d []string
	cmp := func(field string, a, b any) {
		if a != b {
			d = append(d, fmt.Sprintf("%s: cluster has %v, client has %v", field, a, b))
		}
	}
	cmp("model", have.GetModel(), got.GetModel())
	cmp("dtype", have.GetDtype(), got.GetDtype())
	cmp("tokens_per_chunk", have.GetTokensPerChunk(), got.GetTokensPerChunk())
	cmp("layout", have.GetLayout(), got.GetLayout())
	cmp("hash_scheme", have.GetHashScheme(), got.GetHashScheme())
	cmp("tp_rank", have.GetTpRank(), got.GetTpRank())
	cmp("tp_size", have.GetTpSize(), got.GetTpSize())
	keys := map[string]bool{}
	for k := range have.GetExtra() {
		keys[k] = true
	}
	for k := range got.GetExtra() {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		cmp("extra."+k, have.GetExtra()[k], got.GetExtra()[k])
	}
	if len(d) == 0 {
		return "schemas are equal"
	}
	return strings.Join(d, "; ")
}

// validateSchema checks a schema a client registers.
func validateSchema(name string, s *kvringv1.NamespaceSchema) error {
	if err := store.ValidateNamespace(name); err != nil || len(name) > maxNamespaceName {
		return fmt.Errorf("%w: namespace name %q: 1 to %d characters from letters, digits and . _ : / - = +",
			transfer.ErrInvalidArgument, name, maxNamespaceName)
	}
	switch {
	case s == nil:
		return fmt.Errorf("%w: namespace %q: schema is required", transfer.ErrInvalidArgument, name)
	case s.GetModel() == "":
		return fmt.Errorf("%w: namespace %q: schema.model is required", transfer.ErrInvalidArgument, name)
	case s.GetTokensPerChunk() == 0:
		return fmt.Errorf("%w: namespace %q: schema.tokens_per_chunk must be positive", transfer.ErrInvalidArgument, name)
	case s.GetTpSize() > 0 && s.GetTpRank() >= s.GetTpSize():
		return fmt.Errorf("%w: namespace %q: schema.tp_rank %d must be below tp_size %d",
			transfer.ErrInvalidArgument, name, s.GetTpRank(), s.GetTpSize())
	}
	return nil
}

// storeNamespace is the store's namespace for a registered namespace: the
// name plus the first 8 bytes of the fingerprint, so chunks written under two
// schemas of one name can never meet.
func storeNamespace(name string, fp []byte) string {
	return name + ":" + hex.EncodeToString(fp[:min(8, len(fp))])
}

func (r *registry) get(name string) *kvringv1.NamespaceRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.recs[name]
}

func (r *registry) list() []*kvringv1.NamespaceRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*kvringv1.NamespaceRecord, 0, len(r.recs))
	for _, rec := range r.recs {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b *kvringv1.NamespaceRecord) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// wins reports whether record a takes precedence over b for the same name:
// the earlier registration wins, then the lower fingerprint.
func wins(a, b *kvringv1.NamespaceRecord) bool {
	if a.GetCreatedUnixMs() != b.GetCreatedUnixMs() {
		return a.GetCreatedUnixMs() < b.GetCreatedUnixMs()
	}
	return bytes.Compare(a.GetFingerprint(), b.GetFingerprint()) < 0
}

// merge offers a record (from a client registration or a peer) and returns
// the record this node holds for the name afterwards, and whether the offer
// was taken.
func (r *registry) merge(rec *kvringv1.NamespaceRecord) (*kvringv1.NamespaceRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.recs[rec.GetName()]
	if cur != nil && (proto.Equal(cur, rec) || !wins(rec, cur)) {
		return cur, proto.Equal(cur, rec)
	}
	r.recs[rec.GetName()] = rec
	return rec, true
}

// resolve checks a data call's namespace reference and returns the store
// namespace and the record. Errors are FailedPrecondition-class: the
// namespace is unknown here, or the client's fingerprint is not the
// cluster's.
func (r *registry) resolve(ref *kvringv1.NamespaceRef) (string, *kvringv1.NamespaceRecord, error) {
	if ref == nil || ref.GetName() == "" {
		return "", nil, fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument)
	}
	rec := r.get(ref.GetName())
	if rec == nil {
		return "", nil, fmt.Errorf("%w: namespace %q is not registered on this node: call RegisterNamespace first",
			transfer.ErrUnknownNamespace, ref.GetName())
	}
	if !bytes.Equal(rec.GetFingerprint(), ref.GetFingerprint()) {
		return "", nil, fmt.Errorf("%w: namespace %q: the cluster's schema fingerprint is %x, the client's is %x; "+
			"register again to see which schema fields differ", transfer.ErrSchemaMismatch, ref.GetName(),
			short(rec.GetFingerprint()), short(ref.GetFingerprint()))
	}
	return storeNamespace(rec.GetName(), rec.GetFingerprint()), rec, nil
}

func short(b []byte) []byte { return b[:min(8, len(b))] }

package namespace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// Fingerprint is SHA-256 over a canonical text form of the schema:
// one "key=value\n" line per field in a fixed order, extra keys sorted.
func Fingerprint(s *kvringv1.NamespaceSchema) []byte {
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
	if k := GroupSize(s); k > 1 { // absent at 1, so schemas from before grouping keep their fingerprint
		fmt.Fprintf(&b, "chunks_per_group=%d\n", k)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return sum[:]
}

// Diff names the fields in which two schemas differ, for the error a
// mismatched client gets.
func Diff(have, got *kvringv1.NamespaceSchema) string {
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
	cmp("chunks_per_group", GroupSize(have), GroupSize(got))
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

// ValidateSchema checks a schema a client registers.
func ValidateSchema(name string, s *kvringv1.NamespaceSchema) error {
	if err := store.ValidateNamespace(name); err != nil || len(name) > MaxNameLen {
		return fmt.Errorf("%w: namespace name %q: 1 to %d characters from letters, digits and . _ : / - = +",
			transfer.ErrInvalidArgument, name, MaxNameLen)
	}
	switch {
	case s == nil:
		return fmt.Errorf("%w: namespace %q: schema is required", transfer.ErrInvalidArgument, name)
	case s.GetModel() == "":
		return fmt.Errorf("%w: namespace %q: schema.model is required", transfer.ErrInvalidArgument, name)
	case s.GetTokensPerChunk() == 0:
		return fmt.Errorf("%w: namespace %q: schema.tokens_per_chunk must be positive", transfer.ErrInvalidArgument, name)
	case s.GetChunksPerGroup() > MaxGroupSize:
		return fmt.Errorf("%w: namespace %q: schema.chunks_per_group %d is above %d",
			transfer.ErrInvalidArgument, name, s.GetChunksPerGroup(), MaxGroupSize)
	case s.GetTpSize() > 0 && s.GetTpRank() >= s.GetTpSize():
		return fmt.Errorf("%w: namespace %q: schema.tp_rank %d must be below tp_size %d",
			transfer.ErrInvalidArgument, name, s.GetTpRank(), s.GetTpSize())
	}
	return nil
}

// MaxGroupSize is the largest placement group a schema may declare.
const MaxGroupSize = 4096

// GroupSize is the schema's placement group size K in chunks: 1 when the
// schema leaves it 0 (each chunk placed by its own id).
func GroupSize(s *kvringv1.NamespaceSchema) int {
	return max(1, int(s.GetChunksPerGroup()))
}

// StoreName is the store's namespace for a registered namespace: the
// name plus the first 8 bytes of the fingerprint, so chunks written under two
// schemas of one name can never meet.
func StoreName(name string, fp []byte) string {
	return name + ":" + hex.EncodeToString(fp[:min(8, len(fp))])
}

package namespace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

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
	case len(s.GetModel()) > 256, len(s.GetLayout()) > 256:
		return fmt.Errorf("%w: namespace %q: schema.model and schema.layout are at most 256 bytes", transfer.ErrInvalidArgument, name)
	case len(s.GetDtype()) > 64, len(s.GetHashScheme()) > 64:
		return fmt.Errorf("%w: namespace %q: schema.dtype and schema.hash_scheme are at most 64 bytes", transfer.ErrInvalidArgument, name)
	case len(s.GetExtra()) > 32:
		return fmt.Errorf("%w: namespace %q: schema.extra has %d entries, at most 32", transfer.ErrInvalidArgument, name, len(s.GetExtra()))
	case s.GetChunksPerGroup() > MaxGroupSize:
		return fmt.Errorf("%w: namespace %q: schema.chunks_per_group %d is above %d",
			transfer.ErrInvalidArgument, name, s.GetChunksPerGroup(), MaxGroupSize)
	case s.GetTpSize() > 0 && s.GetTpRank() >= s.GetTpSize():
		return fmt.Errorf("%w: namespace %q: schema.tp_rank %d must be below tp_size %d",
			transfer.ErrInvalidArgument, name, s.GetTpRank(), s.GetTpSize())
	}
	for k, v := range s.GetExtra() {
		if len(k) > 256 || len(v) > 256 {
			return fmt.Errorf("%w: namespace %q: schema.extra keys and values are at most 256 bytes", transfer.ErrInvalidArgument, name)
		}
	}
	return nil
}

// maxClockSkew is how far in the future a peer's record may say it was
// created.
const maxClockSkew = time.Hour

// ValidateRecord checks a namespace record a peer offers: a valid schema
// whose fingerprint is the record's, replication settings a client could
// have registered (1 <= min_replicas <= replication_factor <= maxReplicas),
// and a creation time after 2020 and not beyond now plus an hour. A record
// that fails is never merged: it could not have come from a registration.
func ValidateRecord(rec *kvringv1.NamespaceRecord, maxReplicas uint32, now time.Time) error {
	if err := ValidateSchema(rec.GetName(), rec.GetSchema()); err != nil {
		return err
	}
	rf, minR, created := rec.GetReplicationFactor(), rec.GetMinReplicas(), rec.GetCreatedUnixMs()
	switch {
	case !bytes.Equal(rec.GetFingerprint(), Fingerprint(rec.GetSchema())):
		return fmt.Errorf("%w: namespace record %q: its fingerprint is not its schema's", transfer.ErrInvalidArgument, rec.GetName())
	case rf < 1 || rf > maxReplicas || minR < 1 || minR > rf:
		return fmt.Errorf("%w: namespace record %q: replication %d, min replicas %d (want 1 <= min <= replication <= %d)",
			transfer.ErrInvalidArgument, rec.GetName(), rf, minR, maxReplicas)
	case created < minCreatedUnixMs || created > now.Add(maxClockSkew).UnixMilli():
		return fmt.Errorf("%w: namespace record %q: created at %d ms, not between 2020 and now", transfer.ErrInvalidArgument, rec.GetName(), created)
	}
	return validateShare(rec.GetName(), rec.GetShare(), now)
}

// minCreatedUnixMs is 2020-01-01T00:00:00Z: no registration is older.
const minCreatedUnixMs = 1577836800000

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

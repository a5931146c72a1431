package namespace

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// TestFingerprintOfAnUngroupedSchemaIsUnchanged: a schema that leaves
// chunks_per_group at 0 or 1 keeps the fingerprint it had before the field
// existed (clients that predate it keep working); a group size above 1 is
// part of the fingerprint, and Diff names it.
func TestFingerprintOfAnUngroupedSchemaIsUnchanged(t *testing.T) {
	s := &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}
	// SHA-256 of "model=m\ndtype=bf16\ntokens_per_chunk=16\nlayout=\nhash_scheme=\ntp_rank=0\ntp_size=0\n".
	const before = "a2763811d5cfcd8cd06aa630390a61866a18c7b4ee6a508355a76bf479dea077"
	got0 := hex.EncodeToString(Fingerprint(s))
	if got0 != before {
		t.Fatalf("fingerprint %s, want the one from before groups %s", got0, before)
	}
	s1 := &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 1}
	if got1 := hex.EncodeToString(Fingerprint(s1)); got1 != got0 {
		t.Fatalf("chunks_per_group 1 changes the fingerprint: %s vs %s", got1, got0)
	}
	s32 := &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 32}
	if hex.EncodeToString(Fingerprint(s32)) == got0 {
		t.Fatal("chunks_per_group 32 has the fingerprint of an ungrouped schema")
	}
	if d := Diff(s, s32); !strings.Contains(d, "chunks_per_group: cluster has 1, client has 32") {
		t.Fatalf("Diff = %q", d)
	}
	if err := ValidateSchema("ns", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16, ChunksPerGroup: MaxGroupSize + 1}); err == nil {
		t.Fatal("a group size above the maximum was accepted")
	}
}

// TestPeerRecordsThatNoRegistrationCouldMakeAreRefused: a record a peer
// offers is merged only if a client could have registered it: its
// fingerprint is its schema's, its replication is within the ring's, and
// it was created after 2020 and not in the future. The registry holds at
// most MaxNamespaces names.
func TestPeerRecordsThatNoRegistrationCouldMakeAreRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := NewRegistryWith(RegistryConfig{MaxNamespaces: 2, MaxReplicas: 3, Now: func() time.Time { return now }})
	schema := &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}
	good := func() *kvringv1.NamespaceRecord {
		return &kvringv1.NamespaceRecord{Name: "ns", Schema: schema, Fingerprint: Fingerprint(schema),
			ReplicationFactor: 1, MinReplicas: 1, CreatedUnixMs: now.UnixMilli() - 1000}
	}
	for name, forge := range map[string]func(*kvringv1.NamespaceRecord){
		"created at 0":          func(r *kvringv1.NamespaceRecord) { r.CreatedUnixMs = 0 },
		"created in the future": func(r *kvringv1.NamespaceRecord) { r.CreatedUnixMs = now.Add(2 * time.Hour).UnixMilli() },
		"foreign fingerprint":   func(r *kvringv1.NamespaceRecord) { r.Fingerprint = make([]byte, 32) },
		"replication 9":         func(r *kvringv1.NamespaceRecord) { r.ReplicationFactor, r.MinReplicas = 9, 1 },
		"min above replication": func(r *kvringv1.NamespaceRecord) { r.MinReplicas = 2 },
		"no schema":             func(r *kvringv1.NamespaceRecord) { r.Schema = nil },
	} {
		rec := good()
		forge(rec)
		if _, _, err := r.MergePeer(rec); !errors.Is(err, transfer.ErrInvalidArgument) {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if r.Get("ns") != nil {
		t.Fatal("a forged record was merged")
	}
	if _, ok, err := r.MergePeer(good()); err != nil || !ok {
		t.Fatalf("a good record: %v %v", ok, err)
	}
	other := good()
	other.Name = "ns2"
	if _, _, err := r.MergePeer(other); err != nil {
		t.Fatal(err)
	}
	third := good()
	third.Name = "ns3"
	if _, _, err := r.MergePeer(third); !errors.Is(err, ErrTooManyNamespaces) || !errors.Is(err, transfer.ErrResourceExhausted) {
		t.Fatalf("a third namespace past the cap of 2: %v", err)
	}
}

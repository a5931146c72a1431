package namespace

import (
	"encoding/hex"
	"strings"
	"testing"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
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

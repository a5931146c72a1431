package namespace

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// withShare is rec carrying a guarantee of pct % set at ms by node.
func withShare(rec *kvringv1.NamespaceRecord, pct float64, ms int64, node string) *kvringv1.NamespaceRecord {
	rec = proto.CloneOf(rec)
	rec.Share = &kvringv1.NamespaceShare{SetUnixMs: ms, SetBy: node}
	if pct > 0 {
		rec.Share.Guarantee = &kvringv1.ShareAmount{Percent: pct}
	}
	return rec
}

// TestANamespacesShareTravelsWithItsRecord: a share used to be each node's
// own setting, so a node that joined later had none. Now the record carries
// it: a joining node's sync takes it (and tells the node to enforce it), a
// later setting replaces an earlier one whichever order they arrive in, and
// a setting to the same bounds changes nothing.
func TestANamespacesShareTravelsWithItsRecord(t *testing.T) {
	t.Parallel()
	now := time.Now()
	base := recordAt("llama", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}, now.Add(-time.Hour).UnixMilli())
	var enforced []float64
	r := NewRegistryWith(RegistryConfig{ShareChanged: func(rec *kvringv1.NamespaceRecord) {
		enforced = append(enforced, rec.GetShare().GetGuarantee().GetPercent())
	}})
	first := withShare(base, 25, now.Add(-time.Minute).UnixMilli(), "a")
	if _, from := r.SyncFrom(context.Background(), []Lister{func(context.Context) ([]*kvringv1.NamespaceRecord, error) {
		return []*kvringv1.NamespaceRecord{first}, nil
	}}); from != 0 || r.Get("llama").GetShare().GetGuarantee().GetPercent() != 25 {
		t.Fatalf("a joining node's sync: %v", r.Get("llama"))
	}
	later := withShare(base, 40, now.UnixMilli(), "b")
	if _, taken, err := r.MergePeer(later); err != nil || !taken {
		t.Fatalf("a later setting: taken %v, %v", taken, err)
	}
	if held, taken, _ := r.MergePeer(first); taken || held.GetShare().GetGuarantee().GetPercent() != 40 {
		t.Fatalf("an earlier setting arriving late: taken %v, holds %v", taken, held.GetShare())
	}
	if _, taken, _ := r.MergePeer(base); taken {
		t.Fatal("a record without a share replaced one with a share")
	}
	if len(enforced) != 2 || enforced[0] != 25 || enforced[1] != 40 {
		t.Fatalf("shares enforced: %v, want 25 then 40", enforced)
	}
	set := &kvringv1.NamespaceShare{Guarantee: &kvringv1.ShareAmount{Percent: 40}, SetUnixMs: now.UnixMilli() + 1, SetBy: "c"}
	if _, changed, err := r.SetShare("llama", set); err != nil || changed {
		t.Fatalf("setting the bounds in force: changed %v, %v", changed, err)
	}
	set.Guarantee = nil // removed
	rec, changed, err := r.SetShare("llama", set)
	if err != nil || !changed || rec.GetShare().GetGuarantee() != nil || rec.GetShare().GetSetBy() != "c" {
		t.Fatalf("removing the share: %v %v %v", rec, changed, err)
	}
	bad := withShare(base, 140, now.UnixMilli()+2, "d")
	if _, _, err := r.MergePeer(bad); err == nil {
		t.Fatal("a record with a share of 140 % was taken")
	}
}

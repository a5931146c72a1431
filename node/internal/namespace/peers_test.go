package namespace

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// recordAt is a valid record of name with schema, registered at ms.
func recordAt(name string, schema *kvringv1.NamespaceSchema, ms int64) *kvringv1.NamespaceRecord {
	return &kvringv1.NamespaceRecord{Name: name, Schema: schema, Fingerprint: Fingerprint(schema), ReplicationFactor: 1,
		MinReplicas: 1, CreatedUnixMs: ms, CreatedBy: "peer"}
}

// TestAnEarlierRegistrationElsewhereWins: two nodes register one name
// with different schemas at once; the record registered first (the lower
// fingerprint at the same time) wins on both, and the loser's client is
// told its schema does not match instead of being told it created it.
func TestAnEarlierRegistrationElsewhereWins(t *testing.T) {
	t.Parallel()
	now := time.Now()
	theirs := recordAt("llama", &kvringv1.NamespaceSchema{Model: "a", TokensPerChunk: 16}, now.Add(-time.Second).UnixMilli())
	r := NewRegistry()
	d := Defaults{Replicas: 1, MinReplicas: 1, MaxReplicas: 3}
	reg := Registration{Name: "llama", Schema: &kvringv1.NamespaceSchema{Model: "b", TokensPerChunk: 16}, Self: "n1", Now: now}
	offered := 0
	peer := func(_ context.Context, rec *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord {
		offered++
		if Wins(theirs, rec) {
			return theirs
		}
		return nil
	}
	if _, created, err := r.Register(context.Background(), reg, d, peer); !errors.Is(err, transfer.ErrSchemaMismatch) || created {
		t.Fatalf("a registration that lost: created %v, %v; want a schema mismatch", created, err)
	}
	if offered != 1 || string(r.Get("llama").GetFingerprint()) != string(theirs.GetFingerprint()) {
		t.Fatalf("the registry holds %v after %d offers, want the earlier record", r.Get("llama"), offered)
	}
	same := recordAt("x", theirs.GetSchema(), 5)
	other := recordAt("x", reg.Schema, 5)
	if Wins(same, other) == Wins(other, same) {
		t.Fatal("Wins does not order two records registered at the same time")
	}
}

// TestSyncLearnsFromTheFirstPeerThatAnswers: a joining node tries its peers
// in order, takes every valid record of the first that answers and none of
// a record that fails its checks; with no peer answering it learns nothing.
func TestSyncLearnsFromTheFirstPeerThatAnswers(t *testing.T) {
	t.Parallel()
	now := time.Now().UnixMilli()
	good := recordAt("good", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}, now)
	bad := recordAt("bad", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}, now)
	bad.Fingerprint = []byte{1, 2, 3} // not the schema's
	var asked []int
	lister := func(i int, recs []*kvringv1.NamespaceRecord, err error) Lister {
		return func(context.Context) ([]*kvringv1.NamespaceRecord, error) {
			asked = append(asked, i)
			return recs, err
		}
	}
	r := NewRegistry()
	learned, from := r.SyncFrom(context.Background(), []Lister{
		lister(0, nil, errors.New("unreachable")),
		lister(1, []*kvringv1.NamespaceRecord{good, bad}, nil),
		lister(2, []*kvringv1.NamespaceRecord{recordAt("late", good.GetSchema(), now)}, nil),
	})
	if from != 1 || learned != 2 || !slices.Equal(asked, []int{0, 1}) {
		t.Fatalf("sync: learned %d from %d after asking %v", learned, from, asked)
	}
	if r.Get("good") == nil || r.Get("bad") != nil || r.Get("late") != nil {
		t.Fatalf("the registry holds %v", r.List())
	}
	if _, from := NewRegistry().SyncFrom(context.Background(), []Lister{lister(3, nil, errors.New("down"))}); from != -1 {
		t.Fatalf("a sync where no peer answered reports peer %d", from)
	}
}

// TestResolveChecksTheClientsReference: a data call's reference must name
// a registered namespace with the cluster's fingerprint; the answer is the
// store namespace.
func TestResolveChecksTheClientsReference(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	rec := recordAt("llama", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}, time.Now().UnixMilli())
	if _, _, err := r.Merge(rec); err != nil {
		t.Fatal(err)
	}
	ns, got, err := r.Resolve(&kvringv1.NamespaceRef{Name: "llama", Fingerprint: rec.GetFingerprint()})
	if err != nil || got != r.Get("llama") || ns != StoreName("llama", rec.GetFingerprint()) {
		t.Fatalf("resolve: %q %v %v", ns, got, err)
	}
	for _, c := range []struct {
		ref  *kvringv1.NamespaceRef
		want error
	}{
		{nil, transfer.ErrInvalidArgument},
		{&kvringv1.NamespaceRef{Name: "other", Fingerprint: rec.GetFingerprint()}, transfer.ErrUnknownNamespace},
		{&kvringv1.NamespaceRef{Name: "llama", Fingerprint: []byte{9}}, transfer.ErrSchemaMismatch},
	} {
		if _, _, err := r.Resolve(c.ref); !errors.Is(err, c.want) {
			t.Fatalf("resolve %v: %v, want %v", c.ref, err, c.want)
		}
	}
}

// TestGroupRunsMustCoverTheIdsExactly: a grouped namespace's request must
// carry runs of 32-byte keys covering its ids; adjacent runs of one key
// are one group; an ungrouped namespace's request must carry none.
func TestGroupRunsMustCoverTheIdsExactly(t *testing.T) {
	t.Parallel()
	grouped := recordAt("g", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16, ChunksPerGroup: 4}, 1)
	flat := recordAt("f", &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}, 1)
	ids := [][]byte{{1}, {2}, {3}, {4}, {5}}
	k1, k2 := make([]byte, 32), make([]byte, 32)
	k2[0] = 1
	g, err := ResolveGroups(grouped, ids, []*kvringv1.GroupRun{{Key: k1, Count: 2}, {Key: k1, Count: 1}, {Key: k2, Count: 2}}, false)
	if err != nil || !g.Grouped || g.N != 2 || !slices.Equal(g.Of, []int{0, 0, 0, 1, 1}) || string(g.Keys[4]) != string(k2) {
		t.Fatalf("resolve: %+v %v", g, err)
	}
	for name, runs := range map[string][]*kvringv1.GroupRun{
		"none":      nil,
		"short key": {{Key: []byte{1}, Count: 5}},
		"too few":   {{Key: k1, Count: 4}},
		"too many":  {{Key: k1, Count: 6}},
	} {
		if _, err := ResolveGroups(grouped, ids, runs, false); !errors.Is(err, transfer.ErrInvalidArgument) {
			t.Fatalf("runs %s: %v, want invalid argument", name, err)
		}
	}
	if g, err := ResolveGroups(grouped, ids, nil, true); err != nil || g.Grouped || g.N != 5 {
		t.Fatalf("optional runs left out: %+v %v", g, err)
	}
	if _, err := ResolveGroups(flat, ids, []*kvringv1.GroupRun{{Key: k1, Count: 5}}, false); !errors.Is(err, transfer.ErrInvalidArgument) {
		t.Fatalf("runs in an ungrouped namespace: %v", err)
	}
}

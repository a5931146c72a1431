package namespace

import (
	"context"
	"errors"
	"testing"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// TestCheckNeverCreatesANamespace: Check of a name the registry does not
// know is ErrUnknownNamespace and leaves the registry as it was (a read of a
// misspelt name must not register it, nor count against MaxNamespaces);
// once Register created it, Check returns its record, and a different
// schema is ErrSchemaMismatch.
func TestCheckNeverCreatesANamespace(t *testing.T) {
	t.Parallel()
	r := NewRegistryWith(RegistryConfig{MaxNamespaces: 1})
	d := Defaults{Replicas: 1, MinReplicas: 1, MaxReplicas: 3}
	schema := &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}
	reg := Registration{Name: "llama", Schema: schema, Self: "n1", Now: time.Now()}
	noPeers := func(context.Context, *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord { return nil }

	typo := reg
	typo.Name = "llamma"
	if _, err := r.Check(typo, d); !errors.Is(err, transfer.ErrUnknownNamespace) {
		t.Fatalf("Check of an unknown name: %v, want ErrUnknownNamespace", err)
	}
	if len(r.List()) != 0 {
		t.Fatalf("Check registered %v", r.List())
	}
	created, _, err := r.Register(context.Background(), reg, d, noPeers) // the one namespace MaxNamespaces allows
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := r.Check(reg, d); err != nil || rec != created {
		t.Fatalf("Check of the registered name: %v, %v", rec, err)
	}
	other := reg
	other.Schema = &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 32}
	if _, err := r.Check(other, d); !errors.Is(err, transfer.ErrSchemaMismatch) {
		t.Fatalf("Check with another schema: %v, want ErrSchemaMismatch", err)
	}
}

// memCatalog is a Catalog in memory.
type memCatalog struct{ recs map[string][]byte }

func (c *memCatalog) SaveNamespaceRecord(name string, rec []byte) error {
	c.recs[name] = rec
	return nil
}

func (c *memCatalog) DeleteNamespaceRecord(name string) error {
	delete(c.recs, name)
	return nil
}

// TestRestoreTakesBackWhatTheCatalogKept: records taken (registered or
// merged) and deleted reach the catalog; a new registry restores them,
// dropping (from the catalog too) a record that cannot be read, fails its
// checks or exceeds MaxNamespaces.
func TestRestoreTakesBackWhatTheCatalogKept(t *testing.T) {
	t.Parallel()
	cat := &memCatalog{recs: map[string][]byte{}}
	r := NewRegistryWith(RegistryConfig{Catalog: cat})
	d := Defaults{Replicas: 1, MinReplicas: 1, MaxReplicas: 3}
	noPeers := func(context.Context, *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord { return nil }
	for _, name := range []string{"a", "b", "c"} {
		reg := Registration{Name: name, Schema: &kvringv1.NamespaceSchema{Model: "m", TokensPerChunk: 16}, Self: "n1", Now: time.Now()}
		if _, _, err := r.Register(context.Background(), reg, d, noPeers); err != nil {
			t.Fatal(err)
		}
	}
	r.Delete("c")
	cat.recs["junk"] = []byte("not a record")
	cat.recs["x"] = cat.recs["a"] // the record of another name

	again := NewRegistryWith(RegistryConfig{Catalog: cat, MaxNamespaces: 1})
	restored, dropped := again.Restore(cat.recs)
	if restored != 1 || len(dropped) != 3 || again.Get("a") == nil || again.Get("b") != nil {
		t.Fatalf("restored %d, dropped %q, a %v b %v; want a restored, b beyond MaxNamespaces, junk and x dropped",
			restored, dropped, again.Get("a"), again.Get("b"))
	}
	if _, ok := cat.recs["junk"]; ok || len(cat.recs) != 1 {
		t.Fatalf("the catalog keeps %d records after the restore, want a alone", len(cat.recs))
	}
}

package store

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// corruptCatalogStore fills a store with chunks (enough that the chunk
// bucket has pages of its own), closes it and returns its config, node id
// and the chunks.
func corruptCatalogStore(t *testing.T) (Config, string, []*chunkSpec) {
	t.Helper()
	cfg := testConfig(t, 16<<20)
	s := openTest(t, cfg)
	var universe []*chunkSpec
	for i := range 300 {
		c := newSpec(uint64(i), 100)
		universe = append(universe, c)
		mustPut(t, s, "ns", c.id, c.data)
	}
	node := s.NodeID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg, node, universe
}

// overwrite writes garbage over n bytes of the file at off.
func overwrite(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, n), off); err != nil {
		t.Fatal(err)
	}
}

// reopenCorrupt opens a store on cfg, logging to a buffer, and checks that it
// started cold: the catalog was moved aside with one loud log line naming
// it, nothing is held, and the store takes and keeps new chunks.
func reopenCorrupt(t *testing.T, cfg Config, universe []*chunkSpec) *Store {
	t.Helper()
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := openTest(t, cfg)
	aside, _ := filepath.Glob(filepath.Join(cfg.DataDir, "catalog.db.corrupt-*"))
	if len(aside) != 1 {
		t.Fatalf("corrupt catalog moved to %v, want one catalog.db.corrupt-<unix> file", aside)
	}
	var loud []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, aside[0]) {
			loud = append(loud, l)
		}
	}
	if len(loud) != 1 {
		t.Fatalf("want one error line naming %s; logs:\n%s", aside[0], logs.String())
	}
	if held := quiescentCheck(t, s, "ns", universe); len(held) != 0 {
		t.Fatalf("%d chunks held after the catalog was lost", len(held))
	}
	for _, c := range universe[:3] {
		mustPut(t, s, "ns", c.id, c.data)
	}
	s = reopen(t, s, cfg)
	if held := quiescentCheck(t, s, "ns", universe); len(held) != 3 {
		t.Fatalf("%d chunks held after a restart on the new catalog, want 3", len(held))
	}
	return s
}

// Both meta pages damaged: bbolt calls the file an invalid database. The
// store moves it aside and starts cold instead of refusing to start, and
// keeps its node identity from the copy beside the catalog (it used to take
// a new one, orphaning the old segment directory without a word).
func TestCatalogWithDamagedMetaPagesIsMovedAside(t *testing.T) {
	t.Parallel()
	cfg, node, universe := corruptCatalogStore(t)
	overwrite(t, filepath.Join(cfg.DataDir, "catalog.db"), 0, 2*4096)
	s := reopenCorrupt(t, cfg, universe)
	if s.NodeID() != node {
		t.Fatalf("node identity %q after damaged meta pages, was %q", s.NodeID(), node)
	}
	if dirs, _ := filepath.Glob(filepath.Join(cfg.ShmDir, "kvring-*")); len(dirs) != 1 {
		t.Fatalf("segment directories after the restart: %v, want the node's one", dirs)
	}
}

// With the catalog's meta pages damaged and no copy of the identity left,
// the node takes a new identity; the segment directory its data directory
// left under the old one is removed, with a log line naming it, instead of
// holding shared memory nobody will ever use.
func TestALostIdentityLeavesNoOrphanedSegmentDirectory(t *testing.T) {
	t.Parallel()
	cfg, node, universe := corruptCatalogStore(t)
	overwrite(t, filepath.Join(cfg.DataDir, "catalog.db"), 0, 2*4096)
	if err := os.Remove(filepath.Join(cfg.DataDir, nodeIDFile)); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := openTest(t, cfg)
	if s.NodeID() == node {
		t.Fatal("the node kept an identity nothing recorded")
	}
	old := nodeShmDir(cfg.ShmDir, node)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the old identity's segment directory %s is still there (%v)", old, err)
	}
	if !strings.Contains(logs.String(), "former node identity") || !strings.Contains(logs.String(), old) {
		t.Fatalf("no log line names the removed directory %s:\n%s", old, logs.String())
	}
	if held := quiescentCheck(t, s, "ns", universe); len(held) != 0 {
		t.Fatalf("%d chunks held after the catalog was lost", len(held))
	}
}

// A damaged data page (the chunk bucket's root): bbolt panics while reading
// it. The store recovers, moves the file aside and starts cold, keeping the
// node identity (its page is intact) and removing the old segment files.
func TestCatalogWithADamagedDataPageIsMovedAside(t *testing.T) {
	t.Parallel()
	cfg, node, universe := corruptCatalogStore(t)
	path := filepath.Join(cfg.DataDir, "catalog.db")
	db, err := bolt.Open(path, 0o640, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	var pageSize int
	db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket(bucketChunks).Root())
		pageSize = tx.DB().Info().PageSize
		return nil
	})
	db.Close()
	if root == 0 {
		t.Fatal("the chunk bucket is inline; the test needs it on a page of its own")
	}
	overwrite(t, path, int64(root)*int64(pageSize), pageSize)
	s := reopenCorrupt(t, cfg, universe)
	if s.NodeID() != node {
		t.Fatalf("node identity %q after a damaged chunk page, was %q", s.NodeID(), node)
	}
}

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSegmentsLiveInAPrivateLockedDirectory: a node's segment files are in
// <shm-dir>/kvring-<node>/ (0700), each 0600; while the store is open the
// directory is listed in use and cannot be removed; after Close it can.
func TestSegmentsLiveInAPrivateLockedDirectory(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 4<<20)
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := newSpec(1, 4096)
	mustPut(t, s, "ns", c.id, c.data)
	dir := nodeShmDir(cfg.ShmDir, s.NodeID())
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("segment directory %s: %v %v, want mode 0700", dir, fi.Mode(), err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment file in the node's directory")
	}
	for _, p := range segs {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("segment %s: %v %v, want mode 0600", p, fi.Mode(), err)
		}
	}
	nodes, err := ListShmNodes(cfg.ShmDir)
	if err != nil || len(nodes) != 1 || nodes[0].Node != s.NodeID() || !nodes[0].InUse || nodes[0].Files == 0 || nodes[0].Bytes == 0 {
		t.Fatalf("ListShmNodes = %+v, %v", nodes, err)
	}
	if err := RemoveShmNode(cfg.ShmDir, s.NodeID()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("removing an open store's segments: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := ListShmNodes(cfg.ShmDir); len(nodes) != 1 || nodes[0].InUse {
		t.Fatalf("after Close: %+v", nodes)
	}
	if err := RemoveShmNode(cfg.ShmDir, s.NodeID()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory is still there: %v", err)
	}
}

// TestPlantedSymlinksAndOpenDirectoriesAreRefused: a symlink planted at the
// node's segment directory, or at the next segment file's path, is never
// followed (the target stays untouched), and a segment directory others
// may enter is refused at Open.
func TestPlantedSymlinksAndOpenDirectoriesAreRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 4<<20)
	s := openTest(t, cfg)
	node := s.NodeID()
	dir := nodeShmDir(cfg.ShmDir, node)
	s.Close()

	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Planted at the next segment's path while the node runs.
	next := filepath.Join(dir, "kvring-"+node+"-00000001.seg")
	if err := os.Symlink(victim, next); err != nil {
		t.Fatal(err)
	}
	c := newSpec(1, 4096)
	if err := s2.put("ns", c.id, c.data, Checksum(c.data)); err != nil {
		t.Errorf("a write whose segment path is a planted symlink: %v; the path should be skipped, not followed", err)
	}
	s2.Close()
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Fatalf("the symlink's target changed: %d bytes, %v", len(b), err)
	}

	// The directory itself replaced by a symlink.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("Open with a symlinked segment directory: %v", err)
	}
	os.Remove(dir)

	// A directory others may enter.
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "others must have no access") {
		t.Fatalf("Open with a world-writable segment directory: %v", err)
	}
}

// TestRemovingTheSegmentsOfARunningNodeNamesItsProcess: removing the
// segments of a node that runs is refused with ErrInUse, saying that the
// node runs, its process id, and that it must be stopped first (not the
// hint for a second node on the same data directory); the list names the
// process too.
func TestRemovingTheSegmentsOfARunningNodeNamesItsProcess(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 4<<20)
	s := openTest(t, cfg)
	err := RemoveShmNode(cfg.ShmDir, s.NodeID())
	want := fmt.Sprintf("node %s is running (pid %d)", s.NodeID(), os.Getpid())
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "stop it first") ||
		strings.Contains(err.Error(), "data directory") {
		t.Fatalf("RemoveShmNode of a running node: %v, want ErrInUse saying %q", err, want)
	}
	nodes, err := ListShmNodes(cfg.ShmDir)
	if err != nil || len(nodes) != 1 || !nodes[0].InUse || nodes[0].PID != os.Getpid() {
		t.Fatalf("ListShmNodes = %+v, %v; want in use by pid %d", nodes, err, os.Getpid())
	}
}

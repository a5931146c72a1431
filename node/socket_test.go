package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
)

// TestLocalSocketLivesWithTheNode: Start creates the socket with its mode,
// a blob put through it grows the node's used bytes, a second node on the
// same path fails naming it, and Close removes the file.
func TestLocalSocketLivesWithTheNode(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Socket.Path = filepath.Join(testutil.SocketDir(t), "kvring.sock")
	n := startNode(t, cfg)
	if n.SocketPath() != cfg.Socket.Path {
		t.Fatalf("SocketPath = %q", n.SocketPath())
	}
	fi, err := os.Stat(cfg.Socket.Path)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket file: %v %v", fi, err)
	}
	c, err := local.Dial(t.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	used := n.Store().Stats().UsedBytes
	b, err := c.CreateBlob(256 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	if got := n.Store().Stats().UsedBytes; got < used+256<<10 {
		t.Fatalf("used bytes %d after a sealed blob, want >= %d", got, used+256<<10)
	}

	other := testNodeConfig(t)
	other.Socket.Path = cfg.Socket.Path
	n2, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Start(t.Context()); err == nil || !strings.Contains(err.Error(), cfg.Socket.Path) {
		n2.Close(context.Background())
		t.Fatalf("a second node on a live socket: %v, want an error naming the path", err)
	}
	n2.Close(context.Background())

	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.Socket.Path); !os.IsNotExist(err) {
		t.Fatalf("socket file after Close: %v", err)
	}
	if _, err := c.InstanceStatus(); err == nil {
		t.Fatal("a call after the node closed succeeded")
	}
}

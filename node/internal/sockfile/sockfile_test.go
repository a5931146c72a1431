package sockfile

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// TestAStaleSocketIsReplacedAndNothingElseIs: a socket file nobody answers
// on is replaced and the new one gets the mode; a live socket and a plain
// file are errors naming the path, and the plain file stays; Close removes
// the socket file.
func TestAStaleSocketIsReplacedAndNothingElseIs(t *testing.T) {
	dir := testutil.SocketDir(t)
	path := filepath.Join(dir, "r.sock")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false) // as a killed process leaves it
	stale.Close()
	lis, err := Listen(path, 0o640)
	if err != nil {
		t.Fatalf("a stale socket: %v, want it replaced", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the socket file: %v, %v; want a socket of mode 0640", fi, err)
	}
	if _, err := Listen(path, 0o640); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("a live socket: %v, want an error naming %s", err, path)
	}
	lis.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket file after Close: %v, want it gone", err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(plain, 0o660); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a plain file: %v, want an error", err)
	}
	if b, err := os.ReadFile(plain); err != nil || string(b) != "data" {
		t.Fatalf("the plain file after Listen: %q, %v; want it untouched", b, err)
	}
}

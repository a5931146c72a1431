package client

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// sdkPackages are the packages an engine links to talk to kvring: the Go SDK
// and what it sends and receives with.
var sdkPackages = []string{
	"github.com/kvring/kvring/client",
	"github.com/kvring/kvring/client/local",
	"github.com/kvring/kvring/transfer",
}

// serverPackages are the packages, and those under them, that the SDK must
// never link: the node's storage engine (the store with bbolt, ristretto and
// the shared-memory code), the node itself, its gossip and its metrics.
var serverPackages = []string{
	"github.com/kvring/kvring/store",
	"github.com/kvring/kvring/node",
	"github.com/kvring/kvring/cmd",
	"github.com/kvring/kvring/loadtest",
	"go.etcd.io/bbolt",
	"github.com/dgraph-io/ristretto",
	"github.com/hashicorp/memberlist",
	"github.com/prometheus/client_golang",
}

// TestTheSDKLinksNoServerPackage: go list -deps of the SDK's packages names
// no package of the node's (store, node, bbolt, ristretto, ...), so an
// engine binary carries the client and not the storage engine. The checksum
// and the store's wire errors live in leaf packages (internal/crc32c,
// internal/storeerr) for this.
func TestTheSDKLinksNoServerPackage(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("cannot find the go command: %v", err)
	}
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, sdkPackages...)
	out, err := exec.Command(goTool, args...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	importers := map[string][]string{} // package -> the SDK's deps that import it
	var deps []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		deps = append(deps, f[0])
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	for _, p := range sdkPackages {
		if !slices.Contains(deps, p) {
			t.Fatalf("go list -deps did not name %s: %q", p, deps)
		}
	}
	for _, dep := range deps {
		for _, bad := range serverPackages {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("the SDK links %s (imported by %s)", dep, strings.Join(importers[dep], ", "))
			}
		}
	}
}

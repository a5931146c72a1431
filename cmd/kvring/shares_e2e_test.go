package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamespaceSharesAreSetShownAndKept: `kvring namespaces set` sets a
// namespace's share on the node (PUT /v1/namespaces/{name}/share), `kvring
// namespaces` and `kvring stats` show it, the metrics export it, shares the
// node cannot keep are refused with the reason, and a restart keeps it.
func TestNamespaceSharesAreSetShownAndKept(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--memory-limit", "64MiB")
	file := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(file, []byte("a chunk of shares/a"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, nil, "put", "--addr", n.grpc, "--namespace", "shares/a", file)
	mustCLI(t, nil, "put", "--addr", n.grpc, "--namespace", "shares/b", file)

	r := mustCLI(t, nil, "namespaces", "set", "shares/a", "--guarantee", "25%", "--cap", "32MiB", "--admin", n.admin)
	if !strings.Contains(r.stdout, "25% (16.0 MiB)") || !strings.Contains(r.stdout, "32MiB") {
		t.Fatalf("namespaces set: want the share in force, 25%% (16.0 MiB) and 32MiB: %v", r)
	}
	checkShare := func(n *e2eNode) {
		t.Helper()
		_, by := namespacesAt(t, n.admin)
		a := by["shares/a"]
		if a.Share.Guarantee.Percent != 25 || a.Share.Cap.Bytes != 32<<20 || a.GuaranteeBytes != 16<<20 || a.CapBytes != 32<<20 || a.SharesDiffer {
			t.Fatalf("namespaces --json: shares/a is %+v, want guarantee 25%% (16 MiB), cap 32 MiB", a)
		}
		if b := by["shares/b"]; !b.Share.Guarantee.IsZero() || !b.Share.Cap.IsZero() {
			t.Fatalf("shares/b has a share it was not given: %+v", b.Share)
		}
		if v, ok := metricValue(t, n, `kvring_namespace_guarantee_bytes{namespace="shares/a"}`); !ok || v != 16<<20 {
			t.Fatalf("kvring_namespace_guarantee_bytes of shares/a: %v %v, want 16 MiB", v, ok)
		}
	}
	checkShare(n)
	table := mustCLI(t, nil, "namespaces", "--admin", n.admin).stdout
	if !strings.Contains(table, "GUARANTEE") || !strings.Contains(table, "25%") {
		t.Fatalf("namespaces table without the share:\n%s", table)
	}
	if st := mustCLI(t, nil, "stats", "--admin", n.admin).stdout; !strings.Contains(st, "shares/a") || !strings.Contains(st, "16.0 MiB") {
		t.Fatalf("stats without shares/a's usage against its 16 MiB guarantee:\n%s", st)
	}

	// Refusals name the reason; nothing changes.
	checkOneLineFailure(t, runCLI(t, nil, "namespaces", "set", "shares/b", "--guarantee", "80%", "--admin", n.admin),
		"the guarantees would add up to")
	checkOneLineFailure(t, runCLI(t, nil, "namespaces", "set", "shares/nobody", "--cap", "10%", "--admin", n.admin),
		`namespace "shares/nobody" is not registered on this node`)
	checkOneLineFailure(t, runCLI(t, nil, "namespaces", "set", "shares/b", "--cap", "half", "--admin", n.admin),
		`--cap: "half" is neither a percentage`)

	stopNode(t, n)
	n = restartNode(t, n, "--admin-actions", "--memory-limit", "64MiB")
	checkShare(n)

	// Neither bound: the share is removed.
	r = mustCLI(t, nil, "namespaces", "set", "shares/a", "--admin", n.admin, "--json")
	var set []json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &set); err != nil || len(set) != 1 {
		t.Fatalf("namespaces set --json: %v %s", err, r.stdout)
	}
	if _, by := namespacesAt(t, n.admin); !by["shares/a"].Share.IsZero() {
		t.Fatalf("share of shares/a after it was removed: %+v", by["shares/a"].Share)
	}
}

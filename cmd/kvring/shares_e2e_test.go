package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
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

// TestANodeThatJoinsLaterEnforcesTheShares: a namespace's share used to be
// each member's own setting: a node that joined after `kvring namespaces
// set` had none until the command was run again. Now the namespace record
// carries it, so the joining node learns it with the namespace and
// enforces it against its own memory limit, and a share later set on one
// member only (PUT on its admin API) reaches the other.
func TestANodeThatJoinsLaterEnforcesTheShares(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--memory-limit", "64MiB")
	file := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(file, []byte("a chunk of shares/late"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, nil, "put", "--addr", n1.grpc, "--namespace", "shares/late", file)
	mustCLI(t, nil, "namespaces", "set", "shares/late", "--guarantee", "25%", "--admin", n1.admin)

	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--memory-limit", "128MiB",
		"--join", n1.gossip)
	const metric = `kvring_namespace_guarantee_bytes{namespace="shares/late"}`
	testutil.Eventually(t, "the joining node to enforce the 25% guarantee (32 MiB of its 128 MiB)", 30*time.Second, func() bool {
		v, ok := metricValue(t, n2, metric)
		return ok && v == 32<<20
	})
	if _, by := namespacesAt(t, n2.admin); by["shares/late"].SharesDiffer || by["shares/late"].Share.Guarantee.Percent != 25 {
		t.Fatalf("namespaces on the joined cluster: %+v, want 25%% on both members", by["shares/late"])
	}

	// Set on n2 alone: n2 offers the record to n1.
	req, err := http.NewRequest(http.MethodPut, "http://"+n2.admin+"/v1/namespaces/shares%2Flate/share",
		strings.NewReader(`{"cap": {"percent": 50}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT share on n2: %s", resp.Status)
	}
	testutil.Eventually(t, "n1 to enforce the cap set on n2 (32 MiB of its 64 MiB) and drop the guarantee", 30*time.Second, func() bool {
		c, okc := metricValue(t, n1, `kvring_namespace_cap_bytes{namespace="shares/late"}`)
		g, _ := metricValue(t, n1, metric)
		return okc && c == 32<<20 && g == 0
	})
}

// TestASharesSetOnOneNodeReachesEveryMember: `kvring namespaces set` used to
// send the share to every alive member, each recording it as its own
// setting, although the namespace's record carries it to the others. Now
// it is set on the node at --admin alone (the others log no set-share
// action) and the command waits until every alive member enforces it,
// printing each; a member that cannot keep it is named and the command
// exits non-zero.
func TestASharesSetOnOneNodeReachesEveryMember(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--memory-limit", "64MiB")
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--memory-limit", "32MiB",
		"--join", n1.gossip)
	testutil.Eventually(t, "both members to know the other", 30*time.Second, func() bool {
		return strings.Contains(n1.logs(), n2.id) && strings.Contains(n2.logs(), n1.id)
	})
	file := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(file, []byte("a chunk of shares/one"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, nil, "put", "--addr", n1.grpc, "--namespace", "shares/one", file)
	testutil.Eventually(t, "n2 to know the namespace", 30*time.Second, func() bool {
		_, by := namespacesAt(t, n2.admin)
		_, ok := by["shares/one"]
		return ok
	})

	r := mustCLI(t, nil, "namespaces", "set", "shares/one", "--guarantee", "25%", "--admin", n1.admin, "--json")
	var set []struct {
		Node           string `json:"node"`
		GuaranteeBytes int64  `json:"guarantee_bytes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &set); err != nil || len(set) != 2 {
		t.Fatalf("namespaces set --json: %v, want both members: %s", err, r.stdout)
	}
	want := map[string]int64{n1.id: 16 << 20, n2.id: 8 << 20} // a quarter of each node's memory
	for _, s := range set {
		if want[s.Node] != s.GuaranteeBytes {
			t.Fatalf("namespaces set: %s enforces %d bytes, want %d: %s", s.Node, s.GuaranteeBytes, want[s.Node], r.stdout)
		}
	}
	if c := strings.Count(n1.logs(), "action=set-share"); c != 1 {
		t.Fatalf("n1 logged %d set-share actions, want 1", c)
	}
	if c := strings.Count(n2.logs(), "action=set-share"); c != 0 {
		t.Fatalf("n2 logged %d set-share actions, want none: the record carries the share", c)
	}

	// A guarantee of 40 MiB fits n1's 64 MiB, not n2's 32 MiB: n2 logs
	// that it cannot keep it, and the command says so.
	r = runCLI(t, nil, "namespaces", "set", "shares/one", "--guarantee", "40MiB", "--admin", n1.admin, "--wait", "2s")
	if r.code == 0 || !strings.Contains(r.stderr, "1 of 2 alive members do not enforce it") || !strings.Contains(r.stderr, n2.id) ||
		!strings.Contains(r.stdout, n1.id) {
		t.Fatalf("a share n2 cannot keep: exit %d, stdout %q, stderr %q; want n1's share and n2 named", r.code, r.stdout, r.stderr)
	}
}

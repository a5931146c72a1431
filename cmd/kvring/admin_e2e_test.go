package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
)

// cliResult is what one run of the kvring CLI printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// cliTimeout bounds one run of the CLI in the tests: a bound on a hang, not
// a speed test (a replay by `kvring bench` takes a minute on a loaded
// 2-core machine under the race detector).
const cliTimeout = 3 * time.Minute

// benchCallTimeout is the tests' `kvring bench --timeout`: the default (10s
// a call) is outrun by a loaded machine, and a call that times out fails
// the report.
const benchCallTimeout = "1m"

// runCLI runs the kvring binary with args and extra environment variables.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	bin := kvringBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// The race detector's default exit delay (1s) would dominate each run.
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0", "KVRING_SOCKET=", "KVRING_RESP_ADDR="), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := testutil.Run(cmd)
	if ctx.Err() != nil {
		t.Fatalf("kvring %v did not finish within %v", args, cliTimeout)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("kvring %v: %v", args, err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func mustCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, env, args...)
	if r.code != 0 {
		t.Fatalf("kvring %v: %v", args, r)
	}
	return r
}

// checkOneLineFailure checks a failed run: non-zero exit, nothing on stdout,
// one line on stderr containing every want, no stack trace and no usage dump.
func checkOneLineFailure(t *testing.T, r cliResult, want ...string) {
	t.Helper()
	msg := strings.TrimSpace(r.stderr)
	if r.code == 0 || r.stdout != "" || msg == "" || strings.Contains(msg, "\n") {
		t.Fatalf("want a non-zero exit with one line on stderr and nothing on stdout: %v", r)
	}
	for _, bad := range []string{"goroutine ", "panic", "Usage:"} {
		if strings.Contains(msg, bad) {
			t.Fatalf("output contains %q: %v", bad, r)
		}
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("error %q does not contain %q", msg, w)
		}
	}
}

// getJSON fetches an admin endpoint and decodes it; it returns the status
// code, or an error without failing the test (for use in a polled condition).
func getJSON(addr, path string, v any) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return resp.StatusCode, fmt.Errorf("GET %s: %w: %s", path, err, body)
		}
	}
	return resp.StatusCode, nil
}

// seesRing reports whether node n lists exactly ids as alive, active ring
// members.
func seesRing(n *e2eNode, ids ...string) bool {
	var ci node.ClusterInfo
	if code, err := getJSON(n.admin, "/v1/cluster", &ci); err != nil || code != 200 {
		return false
	}
	var got []string
	for _, m := range ci.Members {
		if m.Liveness == "alive" && m.State == "active" && m.RingMember {
			got = append(got, m.ID)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(ids))
	return slices.Equal(got, want)
}

// startCluster starts three nodes (the second and third join the first),
// each with the extra serve flags, and waits until each sees all three in
// its ring.
func startCluster(t *testing.T, extra ...string) []*e2eNode {
	t.Helper()
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", extra...)
	join := slices.Concat([]string{"--join", n1.gossip}, extra)
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", join...)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", join...)
	nodes := []*e2eNode{n1, n2, n3}
	testutil.Eventually(t, "every node to see three active members", 20*time.Second, func() bool {
		for _, n := range nodes {
			if !seesRing(n, n1.id, n2.id, n3.id) {
				return false
			}
		}
		return true
	})
	return nodes
}

// stopNode sends SIGTERM, expects a clean exit 0 within e2eStopTimeout
// (a drain, then the node leaves) and holds the node's ports (so calls to
// it are refused, whatever other tests start meanwhile): launch.Node.Stop.
func stopNode(t *testing.T, n *e2eNode) {
	t.Helper()
	stop := func() error { return n.Stop(e2eStopTimeout) } // a node started with startKvring
	if n.ln != nil {
		stop = n.ln.Stop
	}
	if err := stop(); err != nil {
		t.Fatalf("node %s: %v", n.id, err)
	}
}

// TestOperatorSeesTheClusterThroughAdminAPIAndCLI: against a real 3-node
// cluster, the admin API and the CLI describe the members, the ring, the
// store and the namespaces truthfully; put, get and lookup work from the
// command line and fail with a clear reason; configuration follows flag >
// environment > file; and a stopped node gets a one-line error.
func TestOperatorSeesTheClusterThroughAdminAPIAndCLI(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	ids := []string{n1.id, n2.id, n3.id}

	t.Run("admin API", func(t *testing.T) {
		for _, n := range nodes {
			var ci node.ClusterInfo
			if code, err := getJSON(n.admin, "/v1/cluster", &ci); err != nil || code != 200 {
				t.Fatalf("%s /v1/cluster: %d %v", n.id, code, err)
			}
			if ci.NodeID != n.id || ci.Epoch == 0 || len(ci.Members) != 3 {
				t.Fatalf("%s /v1/cluster: %+v", n.id, ci)
			}
			for _, m := range ci.Members {
				o := nodes[slices.Index(ids, m.ID)]
				if m.GRPCAddr != o.grpc || m.AdminAddr != o.admin || m.GossipAddr != o.gossip || m.Self != (m.ID == n.id) ||
					m.BootTime.IsZero() || time.Since(m.BootTime) > time.Minute {
					t.Fatalf("%s lists member %+v; it logged grpc=%s admin=%s gossip=%s", n.id, m, o.grpc, o.admin, o.gossip)
				}
			}
			var ri node.RingInfo
			if code, err := getJSON(n.admin, "/v1/ring", &ri); err != nil || code != 200 {
				t.Fatalf("%s /v1/ring: %d %v", n.id, code, err)
			}
			sum := 0
			for _, m := range ri.Members {
				sum += m.Partitions
				if m.Partitions > ri.MaxLoad || m.Partitions == 0 {
					t.Fatalf("%s /v1/ring: member %+v beyond the load bound %d or empty", n.id, m, ri.MaxLoad)
				}
			}
			if len(ri.Members) != 3 || sum != ri.PartitionCount || ri.PartitionCount == 0 || ri.Epoch != ci.Epoch || ri.NodeID != n.id {
				t.Fatalf("%s /v1/ring: %+v (partitions sum to %d)", n.id, ri, sum)
			}
			var rd node.Readiness
			if code, err := getJSON(n.admin, "/readyz", &rd); err != nil || code != 200 || !rd.Ready || !rd.StoreOpen || !rd.Joined || !rd.Serving {
				t.Fatalf("%s /readyz: %d %v %+v", n.id, code, err, rd)
			}
			if code, err := getJSON(n.admin, "/healthz", nil); err != nil || code != 200 {
				t.Fatalf("%s /healthz: %d %v", n.id, code, err)
			}
		}
		var e struct{ Error string }
		if code, err := getJSON(n1.admin, "/v1/nothing", &e); err != nil || code != 404 || e.Error == "" {
			t.Fatalf("unknown path: %d %v %+v, want 404 with a JSON error", code, err, e)
		}
		resp, err := http.Post("http://"+n1.admin+"/v1/cluster", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || !strings.Contains(resp.Header.Get("Allow"), "GET") || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Fatalf("POST /v1/cluster: %d Allow=%q %s, want 405 with a JSON error", resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		c, _ := newEngine(t, []string{n1.grpc}, 2, 1)
		testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
		_, err := c.Register(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes { // registration is broadcast to every node
			var got struct{ Namespaces []node.NamespaceInfo }
			testutil.Eventually(t, n.id+" to list the namespace", 10*time.Second, func() bool {
				code, err := getJSON(n.admin, "/v1/namespaces", &got)
				return err == nil && code == 200 && len(got.Namespaces) > 0
			})
			ns := got.Namespaces[0]
			if len(got.Namespaces) != 1 || ns.Name != "e2e/llama" || ns.Fingerprint != "" || // hidden without an admin token

				ns.Schema.Model != "llama-8b" || ns.Schema.Dtype != "bf16" || ns.Schema.TokensPerChunk != 16 || ns.Schema.Layout != "nhd" ||
				ns.ReplicationFactor != 2 || ns.MinReplicas != 1 || time.Since(ns.Created) > time.Minute || !slices.Contains(ids, ns.CreatedBy) {
				t.Fatalf("%s /v1/namespaces: %+v, want e2e/llama as registered, fingerprint hidden", n.id, got)
			}
		}
	})

	t.Run("members ring stats", func(t *testing.T) {
		r := mustCLI(t, nil, "members", "--admin", n2.admin)
		for _, n := range nodes {
			line := lineWith(r.stdout, n.id+" ")
			if line == "" || !strings.Contains(line, "alive") || !strings.Contains(line, "active") || !strings.Contains(line, n.grpc) {
				t.Fatalf("members table lacks an alive row for %s:\n%s", n.id, r.stdout)
			}
		}
		var ci node.ClusterInfo
		if err := json.Unmarshal([]byte(mustCLI(t, nil, "members", "--admin", n2.admin, "--json").stdout), &ci); err != nil {
			t.Fatal(err)
		}
		alive := 0
		for _, m := range ci.Members {
			if m.Liveness == "alive" {
				alive++
			}
		}
		if alive != 3 || ci.NodeID != n2.id {
			t.Fatalf("members --json: %+v, want 3 alive members as seen by %s", ci, n2.id)
		}
		// Every member gossips its build: the same binary's here, and the
		// table shows it.
		own := buildInfo() // the test binary's package is the command's: the same Release
		for _, m := range ci.Members {
			if !strings.HasPrefix(m.Version, buildinfo.Release) || m.Version != ci.Build.Version {
				t.Fatalf("members --json: %s has version %q, want the answering node's %q (release %s)", m.ID, m.Version, ci.Build.Version, own.Version)
			}
			if line := lineWith(r.stdout, m.ID+" "); !strings.Contains(line, m.Version) {
				t.Fatalf("members table does not show %s's version %s:\n%s", m.ID, m.Version, r.stdout)
			}
		}
		var v buildinfo.Info
		if code, err := getJSON(n2.admin, "/v1/version", &v); err != nil || code != 200 || v != ci.Build {
			t.Fatalf("GET /v1/version = %d %+v, %v; want %+v", code, v, err, ci.Build)
		}

		var ri node.RingInfo
		if err := json.Unmarshal([]byte(mustCLI(t, nil, "ring", "--admin", n3.admin, "--json").stdout), &ri); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, m := range ri.Members {
			sum += m.Partitions
		}
		if len(ri.Members) != 3 || sum != ri.PartitionCount {
			t.Fatalf("ring --json: %+v: partitions sum to %d", ri, sum)
		}
		table := mustCLI(t, nil, "ring", "--admin", n3.admin).stdout
		for _, m := range ri.Members {
			if !strings.Contains(lineWith(table, m.ID+" "), fmt.Sprint(m.Partitions)) {
				t.Fatalf("ring table lacks %s with %d partitions:\n%s", m.ID, m.Partitions, table)
			}
		}
		if !strings.Contains(lineWith(table, "TOTAL"), fmt.Sprint(ri.PartitionCount)) {
			t.Fatalf("ring table lacks the total %d:\n%s", ri.PartitionCount, table)
		}

		// The CLI's JSON is the node's /v1/stats (the node is idle: poll until two reads agree).
		var cli, api map[string]any
		testutil.Eventually(t, "stats --json to match /v1/stats", 10*time.Second, func() bool {
			cli, api = nil, nil
			if err := json.Unmarshal([]byte(mustCLI(t, nil, "stats", "--admin", n1.admin, "--json").stdout), &cli); err != nil {
				t.Fatal(err)
			}
			if _, err := getJSON(n1.admin, "/v1/stats", &api); err != nil {
				t.Fatal(err)
			}
			return reflect.DeepEqual(cli, api)
		})
		if cli["node_id"] != n1.id {
			t.Fatalf("stats --json: node_id %v, want %s", cli["node_id"], n1.id)
		}
		if out := mustCLI(t, nil, "stats", "--admin", n1.admin).stdout; !strings.Contains(out, n1.id) || !strings.Contains(out, "memory used") {
			t.Fatalf("stats table:\n%s", out)
		}
	})

	t.Run("put get lookup", func(t *testing.T) {
		dir := t.TempDir()
		data := make([]byte, 300<<10)
		rand.Read(data)
		file := filepath.Join(dir, "chunk.bin")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		id := hex.EncodeToString(sum[:])
		ns := []string{"--namespace", "e2e/cli"}

		r := mustCLI(t, nil, append([]string{"put", "--addr", n1.grpc, "--replication", "2", file}, ns...)...)
		holders := 0
		for _, n := range nodes {
			if strings.Contains(r.stdout, n.id) {
				holders++
			}
		}
		if !strings.HasPrefix(r.stdout, "stored "+id) || holders != 2 || r.stderr != "" {
			t.Fatalf("put: want %q stored on 2 holders and nothing on stderr: %v", id, r)
		}
		if r := mustCLI(t, nil, append([]string{"put", "--addr", n2.grpc, file}, ns...)...); !strings.HasPrefix(r.stdout, "already held "+id) {
			t.Fatalf("second put: %v", r)
		}

		out := filepath.Join(dir, "out.bin")
		r = mustCLI(t, nil, append([]string{"get", "--addr", n2.grpc, "--id", id, "-o", out}, ns...)...)
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get -o: %v; %v", err, r)
		}
		if r := mustCLI(t, nil, append([]string{"get", "--addr", n3.grpc, "--id", id}, ns...)...); r.stdout != string(data) {
			t.Fatalf("get to stdout: %d bytes, want the %d bytes put", len(r.stdout), len(data))
		}

		unknown := strings.Repeat("ab", 32)
		r = mustCLI(t, nil, append([]string{"lookup", "--addr", n3.grpc, id, id, unknown, id}, ns...)...)
		if !strings.HasPrefix(r.stdout, "2 of 4 leading ids held") {
			t.Fatalf("lookup: %v, want 2 of 4", r)
		}
		var lr struct{ Held, Asked int }
		r = mustCLI(t, nil, append([]string{"lookup", "--addr", n1.grpc, "--json", unknown, id}, ns...)...)
		if err := json.Unmarshal([]byte(r.stdout), &lr); err != nil || lr.Held != 0 || lr.Asked != 2 {
			t.Fatalf("lookup --json: %v %+v, want 0 of 2", err, lr)
		}

		r = runCLI(t, nil, append([]string{"get", "--addr", n1.grpc, "--id", unknown, "-o", filepath.Join(dir, "miss")}, ns...)...)
		checkOneLineFailure(t, r, unknown, "not found", "not held")
		if _, err := os.Stat(filepath.Join(dir, "miss")); !os.IsNotExist(err) {
			t.Fatalf("a missed get created its output file: %v", err)
		}
		// Another schema under the same name: refused, naming the field.
		r = runCLI(t, nil, append([]string{"put", "--addr", n1.grpc, "--model", "other", file}, ns...)...)
		checkOneLineFailure(t, r, "model: cluster has kvring-cli, client has other")
		checkOneLineFailure(t, runCLI(t, nil, "lookup", "--addr", n1.grpc, "--namespace", "e2e/cli", "xyz"), "id 1")
	})

	t.Run("config precedence", func(t *testing.T) {
		// One file for every command: serve's keys are accepted by stats.
		file := filepath.Join(t.TempDir(), "kvring.yaml")
		os.WriteFile(file, []byte("admin: "+n1.admin+"\njson: true\nmemory-limit: 1GiB\njoin: [a:1, b:2]\n"), 0o644)
		statsNode := func(env []string, args ...string) string {
			t.Helper()
			var st struct {
				NodeID string `json:"node_id"`
			}
			r := mustCLI(t, env, append([]string{"stats", "--config", file}, args...)...)
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
				t.Fatalf("stats with json: true from the file: %v: %v", err, r)
			}
			return st.NodeID
		}
		if got := statsNode(nil); got != n1.id {
			t.Fatalf("file alone: answered by %s, want %s", got, n1.id)
		}
		if got := statsNode([]string{"KVRING_ADMIN=" + n2.admin}); got != n2.id {
			t.Fatalf("environment over file: answered by %s, want %s", got, n2.id)
		}
		if got := statsNode([]string{"KVRING_ADMIN=" + n2.admin}, "--admin", n3.admin); got != n3.id {
			t.Fatalf("flag over environment: answered by %s, want %s", got, n3.id)
		}
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(bad, []byte("admni: "+n1.admin+"\n"), 0o644)
		checkOneLineFailure(t, runCLI(t, nil, "members", "--config", bad), `unknown key "admni"`)
		checkOneLineFailure(t, runCLI(t, []string{"KVRING_CONFIG=" + bad}, "serve"), `unknown key "admni"`)

		// serve: memory-limit from the flag over the environment over the file,
		// admin-addr from the environment over the file (whose value would
		// not even parse), join from the file alone.
		srv := filepath.Join(t.TempDir(), "serve.yaml")
		os.WriteFile(srv, []byte(fmt.Sprintf("memory-limit: 40MiB\nadmin-addr: nonsense\njoin: [%s]\ndata-dir: %s\nshm-dir: %s\n"+
			"grpc-addr: 127.0.0.1:0\ngossip-addr: 127.0.0.1:0\n", n1.gossip, t.TempDir(), shmDir(t))), 0o644)
		p := startKvring(t, []string{"KVRING_ADMIN_ADDR=127.0.0.1:0", "KVRING_MEMORY_LIMIT=44MiB"},
			"serve", "--config", srv, "--memory-limit", "48MiB")
		m := p.waitLog(t, readyRe, 60*time.Second)
		n4 := &e2eNode{proc: *p, id: m[1], grpc: m[2], admin: m[3], gossip: m[4]}
		var st struct {
			LimitBytes int64 `json:"limit_bytes"`
		}
		if _, err := getJSON(n4.admin, "/v1/stats", &st); err != nil || st.LimitBytes != 48<<20 {
			t.Fatalf("memory limit %d (%v), want 48MiB from the flag", st.LimitBytes, err)
		}
		testutil.Eventually(t, "the node configured by file to join", 15*time.Second, func() bool { return seesRing(n4, n1.id, n2.id, n3.id, n4.id) })
		stopNode(t, n4)
	})

	t.Run("unreachable node", func(t *testing.T) {
		stopNode(t, n3)
		for _, args := range [][]string{{"members"}, {"ring"}, {"stats", "--json"}} {
			r := runCLI(t, nil, append(args, "--admin", n3.admin)...)
			checkOneLineFailure(t, r, n3.admin, "connection refused")
		}
		file := filepath.Join(t.TempDir(), "f")
		os.WriteFile(file, []byte("x"), 0o644)
		r := runCLI(t, nil, "put", "--addr", n3.grpc, "--namespace", "e2e/cli", "--timeout", "1s", file)
		checkOneLineFailure(t, r, n3.grpc, "connection refused")
		r = runCLI(t, []string{"KVRING_ADDR=" + n3.grpc, "KVRING_NAMESPACE=e2e/cli", "KVRING_TIMEOUT=500ms"}, "lookup", strings.Repeat("00", 32))
		checkOneLineFailure(t, r, n3.grpc, "cannot connect")
	})
}

// lineWith returns the first line of s that starts with prefix, or "".
func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestTheSettleWindowIsShownAndEnds: a node reports on /v1/ring that it is
// unsettled (its reads also ask non-owners) for --settle-window after it
// starts, and settled after; with the default window it is still unsettled.
func TestTheSettleWindowIsShownAndEnds(t *testing.T) {
	t.Parallel()
	short := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--settle-window", "1s")
	def := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	unsettled := func(n *e2eNode) bool {
		var info struct {
			Unsettled *bool `json:"unsettled"`
		}
		if code, err := getJSON(n.admin, "/v1/ring", &info); err != nil || code != 200 || info.Unsettled == nil {
			t.Fatalf("GET /v1/ring: %d %v %+v", code, err, info)
		}
		return *info.Unsettled
	}
	if !unsettled(def) {
		t.Fatal("a node that just started with the default window reports settled")
	}
	testutil.Eventually(t, "the node with --settle-window 1s to report settled", 20*time.Second, func() bool { return !unsettled(short) })
	if !unsettled(def) {
		t.Fatal("a node with the default 2-minute window reports settled after a few seconds")
	}
}

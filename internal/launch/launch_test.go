package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kvringBin is the kvring binary TestMain builds ("" under -short).
var kvringBin string

// TestMain builds cmd/kvring once, into a directory it removes at the end.
func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	if testingShort() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "kvring-launch-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kvringBin = filepath.Join(dir, "kvring")
	cmd := exec.Command("go", "build", "-o", kvringBin, "../../cmd/kvring")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cannot build kvring: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// testingShort reads -short before m.Run parses the flags.
func testingShort() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.short" || a == "-test.short=true" {
			return true
		}
	}
	return false
}

func needBinary(t *testing.T) {
	t.Helper()
	if kvringBin == "" {
		t.Skip("starts real kvring nodes: skipped by -short")
	}
}

// refused reports whether a TCP connection to addr is refused.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// TestThreeNodesFormOneRingStopRestartAndLeaveNothing: Start launches
// three nodes that see one ring of three, each with its own ports, data,
// socket and segment directories; a stopped node exits 0 and its ports
// refuse connections while it is down; restarted, it is back on the same
// addresses with the same id, and the ring is whole again; a killed node
// restarts too; a paused node answers nothing until it continues; Close
// ends every process and removes every directory it made.
func TestThreeNodesFormOneRingStopRestartAndLeaveNothing(t *testing.T) {
	needBinary(t)
	ctx := context.Background()
	shmRoot := t.TempDir()
	c, err := Start(ctx, Config{Binary: kvringBin, Nodes: 3, RESP: true, Socket: true, ShmRoot: shmRoot,
		Flags: []string{"--rejoin-interval", "1s"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes := c.Nodes()
	checkDistinct(t, nodes)
	ids := []string{nodes[0].ID, nodes[1].ID, nodes[2].ID}
	for _, n := range nodes {
		if !SeesRing(ctx, n.Admin, ids...) {
			t.Fatalf("%s does not see the ring %v", n.ID, ids)
		}
	}

	stopRestart(t, c, 1, ids)
	killRestart(t, c, 2, ids)
	pauseContinue(t, nodes[0])

	var pids []int
	dirs := []string{c.dir}
	for _, n := range c.Nodes() {
		pids = append(pids, n.Pid())
		dirs = append(dirs, n.ShmDir())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if !ProcessGone(p) {
			t.Fatalf("pid %d still runs after Close", p)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there after Close: %v", d, err)
		}
	}
	if left, _ := os.ReadDir(shmRoot); len(left) != 0 {
		t.Fatalf("segment directories left in %s: %v", shmRoot, left)
	}
}

// checkDistinct fails unless every node has its own addresses and
// directories, and serves its Redis port and local socket.
func checkDistinct(t *testing.T, nodes []*Node) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.RESP == "" || n.ID == "" {
			t.Fatalf("node %+v: no id or Redis address", n)
		}
		if _, err := os.Stat(n.SocketPath()); err != nil {
			t.Fatalf("%s's local socket: %v", n.ID, err)
		}
		for _, v := range []string{n.GRPC, n.Admin, n.Gossip, n.RESP, n.DataDir(), n.ShmDir(), n.SocketPath(), n.LogPath()} {
			if seen[v] {
				t.Fatalf("%s is shared by two nodes", v)
			}
			seen[v] = true
		}
	}
}

func stopRestart(t *testing.T, c *Cluster, i int, ids []string) {
	t.Helper()
	n := c.Node(i)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{n.GRPC, n.Admin, n.RESP} {
		if !refused(a) {
			t.Fatalf("%s of the stopped node does not refuse connections", a)
		}
	}
	again := restart(t, c, i, ids)
	if again.ID != n.ID || again.GRPC != n.GRPC || again.Gossip != n.Gossip || again.Admin != n.Admin || again.RESP != n.RESP {
		t.Fatalf("restarted as %+v, want the addresses and id of %+v", again, n)
	}
}

func killRestart(t *testing.T, c *Cluster, i int, ids []string) {
	t.Helper()
	n := c.Node(i)
	n.Kill()
	if n.ExitCode() != -1 || !ProcessGone(n.Pid()) {
		t.Fatalf("killed node: exit code %d", n.ExitCode())
	}
	restart(t, c, i, ids)
}

func restart(t *testing.T, c *Cluster, i int, ids []string) *Node {
	t.Helper()
	again, err := c.Restart(context.Background(), i)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitRing(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !SeesRing(context.Background(), again.Admin, ids...) {
		t.Fatalf("restarted node sees another ring than %v", ids)
	}
	return again
}

// pauseContinue: a paused node does not answer /readyz; continued, it does.
func pauseContinue(t *testing.T, n *Node) {
	t.Helper()
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 300 * time.Millisecond}
	if resp, err := hc.Get("http://" + n.Admin + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatal("a paused node answered /readyz")
	}
	if err := n.Continue(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitReadyz(ctx, n.Admin, n.Done()); err != nil {
		t.Fatal(err)
	}
}

// TestAFailedStartSaysWhyAndLeavesNoProcess: a node given a flag kvring
// does not know exits at once; StartNode returns its log.
func TestAFailedStartSaysWhyAndLeavesNoProcess(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	_, err := StartNode(context.Background(), NodeConfig{Binary: kvringBin, Dir: dir, ShmDir: filepath.Join(dir, "shm"),
		Args: []string{"--no-such-flag"}})
	if err == nil || !contains(err.Error(), "no-such-flag") {
		t.Fatalf("start with a bad flag: %v, want an error quoting the log", err)
	}
}

// TestTheReadyLineIsReadInTextAndJSON: the addresses come from the "node
// ready" line in either log format.
func TestTheReadyLineIsReadInTextAndJSON(t *testing.T) {
	text := `time=x level=INFO msg="node ready" node=n-1 grpc=127.0.0.1:1 admin=127.0.0.1:2 gossip=127.0.0.1:3 memory_limit=1 resp=off resp_socket=/a b`
	js := `{"time":"x","level":"INFO","msg":"node ready","node":"n-1","grpc":"127.0.0.1:1","admin":"127.0.0.1:2","gossip":"127.0.0.1:3","resp":"off","resp_socket":"/a"}`
	for _, line := range []string{text, js} {
		f := parseReady(line)
		if f["node"] != "n-1" || f["grpc"] != "127.0.0.1:1" || f["admin"] != "127.0.0.1:2" || f["gossip"] != "127.0.0.1:3" ||
			off(f["resp"]) != "" || f["resp_socket"] != "/a" {
			t.Fatalf("%s: %v", line, f)
		}
	}
	if parseReady(`msg="node starting" grpc=1`) != nil || parseReady(`{"msg":"other"}`) != nil {
		t.Fatal("another line was taken for the ready line")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestANodeThatLogsOnlyWarningsIsStillKnown: with --log-level warn the node
// never logs "node ready"; the launcher knows its ports (picked before the
// start) and its id (DataDir/node_id), and the Redis port serves.
func TestANodeThatLogsOnlyWarningsIsStillKnown(t *testing.T) {
	needBinary(t)
	c, err := Start(context.Background(), Config{Binary: kvringBin, RESP: true, ShmRoot: t.TempDir(),
		Flags: []string{"--log-level", "warn"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := c.Node(0)
	if strings.Contains(n.Logs(), "node ready") {
		t.Fatal("the node logged its ready line at --log-level warn: the test proves nothing")
	}
	if n.ID == "" || !SeesRing(context.Background(), n.Admin, n.ID) {
		t.Fatalf("node %q at %s: not seen as the ring's one member", n.ID, n.Admin)
	}
	conn, err := net.Dial("tcp", n.RESP)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("PING\r\n"))
	b := make([]byte, 7)
	if _, err := io.ReadFull(conn, b); err != nil || string(b) != "+PONG\r\n" {
		t.Fatalf("PING on %s: %q %v", n.RESP, b, err)
	}
}

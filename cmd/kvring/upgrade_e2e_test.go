package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
)

// upgradeFailedCallBound is the most calls of the upgrade test's load that may
// fail (an error, a chunk not stored, an acknowledged chunk not read back at
// that moment) per node replaced: a call in flight to a node as it stops, or
// routed by a ring view a moment old, fails and the engine retries it. Nothing
// acknowledged may be lost, whatever this bound.
const upgradeFailedCallBound = 20

// release is one line of RELEASES.
type release struct{ version, commit string }

// lastRelease reads the newest release recorded in RELEASES.
func lastRelease(t *testing.T) release {
	t.Helper()
	f, err := os.Open("../../RELEASES")
	if err != nil {
		t.Fatalf("cannot read the release record: %v", err)
	}
	defer f.Close()
	var last release
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fs := strings.Fields(sc.Text()); len(fs) == 2 && !strings.HasPrefix(fs[0], "#") {
			last = release{fs[0], fs[1]}
		}
	}
	if last.commit == "" {
		t.Fatal("RELEASES records no release")
	}
	return last
}

// buildRelease builds kvring at rel's commit from this clone's own history (a
// git worktree in a temporary directory, no network) and returns the binary.
// It fails, saying how to fetch it, when the commit is not in the clone. The
// binary is kept in the user's cache directory (kvring-test/), named by the
// commit, so that later runs skip the build (about a minute of a busy 2-core
// machine); KVRING_RELEASE_CACHE=off builds it every time.
func buildRelease(t *testing.T, rel release) string {
	t.Helper()
	cached := ""
	if dir, err := os.UserCacheDir(); err == nil && os.Getenv("KVRING_RELEASE_CACHE") != "off" {
		cached = filepath.Join(dir, "kvring-test", "kvring-"+rel.version+"-"+rel.commit)
		if out, err := exec.Command(cached, "version").Output(); err == nil && strings.Contains(string(out), rel.commit[:12]) {
			t.Logf("release %s: using %s", rel.version, cached)
			return cached
		}
	}
	bin := buildReleaseAt(t, rel)
	if cached != "" {
		if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil {
			if b, err := os.ReadFile(bin); err == nil && os.WriteFile(cached+".tmp", b, 0o755) == nil {
				os.Rename(cached+".tmp", cached)
			}
		}
	}
	return bin
}

func buildReleaseAt(t *testing.T, rel release) string {
	t.Helper()
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := testutil.CombinedOutput(cmd)
		return strings.TrimSpace(string(out)), err
	}
	top, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatalf("the upgrade test needs the git history of this clone: %v: %s", err, top)
	}
	if out, err := git(top, "cat-file", "-e", rel.commit+"^{commit}"); err != nil {
		t.Fatalf("release %s's commit %s is not in this clone (%s): fetch it with `git fetch origin %s` "+
			"(or `git fetch --unshallow` in a shallow clone), then run the test again", rel.version, rel.commit, out, rel.commit)
	}
	dir := filepath.Join(t.TempDir(), "src-"+rel.version)
	if out, err := git(top, "worktree", "add", "--detach", dir, rel.commit); err != nil {
		t.Fatalf("cannot check out release %s (%s): %v: %s", rel.version, rel.commit, err, out)
	}
	t.Cleanup(func() {
		if out, err := git(top, "worktree", "remove", "--force", dir); err != nil {
			t.Logf("cannot remove the worktree of %s: %v: %s", rel.version, err, out)
		}
	})
	when, _ := git(dir, "show", "-s", "--format=%cI", "HEAD")
	bin := filepath.Join(t.TempDir(), "kvring-"+rel.version)
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X main.commit="+rel.commit+" -X main.commitTime="+when+" -X main.modified=false", "./cmd/kvring")
	build.Dir = dir
	if out, err := testutil.CombinedOutput(build); err != nil {
		t.Fatalf("cannot build release %s: %v: %s", rel.version, err, out)
	}
	t.Logf("built release %s (%s) in %v", rel.version, rel.commit[:12], time.Since(start).Round(time.Millisecond))
	return bin
}

// binaryVersion is what `kvring version --json` says of bin.
func binaryVersion(t *testing.T, bin string) buildinfo.Info {
	t.Helper()
	out, err := exec.Command(bin, "version", "--json").Output()
	var info buildinfo.Info
	if err != nil || json.Unmarshal(out, &info) != nil {
		t.Fatalf("%s version --json: %v: %s", bin, err, out)
	}
	return info
}

// upgradeLoad writes and reads chunks through the SDK at a bounded rate
// until stopped, keeping what was acknowledged and counting failed calls.
type upgradeLoad struct {
	c    *client.Client
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	acked  []uint64 // chunk numbers a put acknowledged
	failed int      // calls that failed, chunks not stored, acknowledged chunks not found
	calls  int
	errs   []string // the first few failures
}

func startUpgradeLoad(c *client.Client) *upgradeLoad {
	l := &upgradeLoad{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *upgradeLoad) fail(why string) {
	l.failed++
	if len(l.errs) < 10 {
		l.errs = append(l.errs, why)
	}
}

func (l *upgradeLoad) run() {
	defer close(l.done)
	tick := time.NewTicker(20 * time.Millisecond) // at most 50 calls a second: a bounded load
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(7, 9))
	for next := uint64(0); ; {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		batch := make([]client.Chunk, 4)
		for i := range batch {
			batch[i] = e2eChunk(next+uint64(i), 16<<10)
		}
		res, err := l.c.Put(ctx, batch)
		l.mu.Lock()
		l.calls++
		switch {
		case err != nil:
			l.fail("put: " + err.Error())
		default:
			for i, r := range res {
				if r.Status == client.Stored || r.Status == client.AlreadyHeld {
					l.acked = append(l.acked, next+uint64(i))
				} else {
					l.fail(fmt.Sprintf("put %d: %v %s", next+uint64(i), r.Status, r.Reason))
				}
			}
		}
		var ids []client.ChunkID
		var nums []uint64
		for range min(4, len(l.acked)) {
			n := l.acked[rng.IntN(len(l.acked))]
			nums, ids = append(nums, n), append(ids, e2eChunk(n, 0).ID)
		}
		l.mu.Unlock()
		next += uint64(len(batch))
		gets, err := l.c.Get(ctx, ids)
		cancel()
		l.mu.Lock()
		l.calls++
		if err != nil {
			l.fail("get: " + err.Error())
		}
		for i, g := range gets {
			if !g.Found {
				l.fail(fmt.Sprintf("get %d: not found: %s", nums[i], g.Reason))
			} else if string(g.Data) != string(e2eChunk(nums[i], 16<<10).Data) {
				panic(fmt.Sprintf("chunk %d read back other bytes", nums[i])) // a client verifies checksums: never
			}
		}
		l.mu.Unlock()
	}
}

// finish stops the load and returns what it acknowledged and how many calls failed.
func (l *upgradeLoad) finish() (acked []uint64, calls, failed int, errs []string) {
	close(l.stop)
	<-l.done
	return l.acked, l.calls, l.failed, l.errs
}

// awaitWholeCluster waits until every node lists every other alive, each at
// the version of the binary it runs (want, by node id).
func awaitWholeCluster(t *testing.T, step string, nodes []*e2eNode, want map[string]string) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("%s: the last view: %s", step, last)
		}
	}()
	testutil.Eventually(t, step+": the cluster whole (every member alive, owning partitions, at its binary's version)", 60*time.Second, func() bool {
		for _, n := range nodes {
			var ci node.ClusterInfo
			if code, err := getJSON(n.admin, "/v1/cluster", &ci); err != nil || code != 200 {
				last = fmt.Sprintf("%s: GET /v1/cluster: %d %v", n.id, code, err)
				return false
			}
			seen := 0
			for _, m := range ci.Members {
				if v, ok := want[m.ID]; ok && m.Liveness == "alive" && m.RingMember && m.Version == v {
					seen++
				}
			}
			if seen != len(nodes) {
				last = fmt.Sprintf("%s sees %+v", n.id, ci.Members)
				return false
			}
		}
		return true
	})
}

// TestRollingUpgradeFromThePreviousRelease builds the newest recorded release
// (RELEASES) from this clone's history, starts three nodes of it, and
// replaces them one at a time with the tree's build under a bounded load of
// writes and reads, each with a SIGTERM drain, as a StatefulSet's rolling
// update does. At every step the cluster is whole: every member sees every
// other alive, owning partitions, and lists each one's version. Afterwards
// every chunk acknowledged before and during the upgrade reads back with its
// bytes (0 lost, 0 corrupt), and the failed calls stay within
// upgradeFailedCallBound per node replaced. Then one node is downgraded to the
// release again: it rejoins, the cluster is whole with both versions listed,
// and everything acknowledged still reads back (docs/deploy.md, "Releases
// and upgrades").
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	t.Parallel()
	start := time.Now()
	treeBin := kvringBinary(t)
	rel := lastRelease(t)
	relBin := buildRelease(t, rel)
	relVersion, treeVersion := binaryVersion(t, relBin).Version, binaryVersion(t, treeBin).Version
	if relVersion != rel.version || treeVersion == relVersion {
		t.Fatalf("release binary says %q (want %q), the tree's says %q", relVersion, rel.version, treeVersion)
	}
	built := time.Since(start)

	nodes := []*e2eNode{startNodeBin(t, relBin, t.TempDir(), shmDir(t))}
	for range 2 {
		nodes = append(nodes, startNodeBin(t, relBin, t.TempDir(), shmDir(t), "--join", nodes[0].gossip))
	}
	version := map[string]string{}
	for _, n := range nodes {
		version[n.id] = relVersion
	}
	awaitWholeCluster(t, "three nodes of "+rel.version, nodes, version)

	c, _ := newEngine(t, []string{nodes[0].grpc, nodes[1].grpc, nodes[2].grpc}, 2, 1)
	testutil.Eventually(t, "the client to connect", 30*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	load := startUpgradeLoad(c)
	for i, n := range nodes {
		stopNode(t, n)
		nodes[i] = restartNodeBin(t, n, treeBin, "--join", nodes[(i+1)%3].gossip)
		version[n.id] = treeVersion
		awaitWholeCluster(t, fmt.Sprintf("node %d of 3 upgraded to %s", i+1, treeVersion), nodes, version)
	}
	acked, calls, failed, errs := load.finish()
	t.Logf("upgrade: %d calls, %d failed (bound %d), %d chunks acknowledged; first failures: %q",
		calls, failed, 3*upgradeFailedCallBound, len(acked), errs)
	if failed > 3*upgradeFailedCallBound {
		t.Errorf("%d calls failed during the upgrade, bound %d: %q", failed, 3*upgradeFailedCallBound, errs)
	}
	if len(acked) == 0 {
		t.Fatal("the load acknowledged nothing")
	}
	readBackAll(t, "after the upgrade", c, acked)

	// Downgrade one node: adjacent releases share a cluster either way.
	stopNode(t, nodes[0])
	nodes[0] = restartNodeBin(t, nodes[0], relBin, "--join", nodes[1].gossip)
	version[nodes[0].id] = relVersion
	awaitWholeCluster(t, "one node downgraded to "+rel.version, nodes, version)
	readBackAll(t, "after the downgrade", c, acked)
	t.Logf("upgrade test: %v in all, %v of it building release %s", time.Since(start).Round(time.Second),
		built.Round(time.Second), rel.version)
}

// readBackAll fails the test unless every acknowledged chunk reads back with
// its bytes (the client checks each chunk's checksum; the bytes are compared
// to what was written as well).
func readBackAll(t *testing.T, step string, c *client.Client, acked []uint64) {
	t.Helper()
	lost := 0
	for from := 0; from < len(acked); from += 64 {
		nums := acked[from:min(from+64, len(acked))]
		ids := make([]client.ChunkID, len(nums))
		for i, n := range nums {
			ids[i] = e2eChunk(n, 0).ID
		}
		var res []client.GetResult
		testutil.Eventually(t, step+": a get to answer", 30*time.Second, func() bool {
			var err error
			res, err = c.Get(t.Context(), ids)
			return err == nil
		})
		for i, r := range res {
			switch {
			case !r.Found:
				lost++
				t.Errorf("%s: acknowledged chunk %d not found: %s", step, nums[i], r.Reason)
			case string(r.Data) != string(e2eChunk(nums[i], 16<<10).Data):
				t.Errorf("%s: chunk %d read back other bytes", step, nums[i])
			}
		}
	}
	t.Logf("%s: %d acknowledged chunks read back, %d lost", step, len(acked)-lost, lost)
}

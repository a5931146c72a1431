package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
)

// reCannotAccept is a guarded listener's log line when descriptors ran out
// under the local socket.
var reCannotAccept = regexp.MustCompile(`cannot accept connections.*listener=localsock`)

// limitDescriptors lowers the open-file limit (soft and hard) of process
// pid to its descriptors open now plus spare, and returns the limit.
func limitDescriptors(t *testing.T, pid, spare int) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(fds) + spare)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
		t.Skipf("cannot lower the node's descriptor limit (prlimit needs CAP_SYS_RESOURCE to lower the hard limit of another process): %v", err)
	}
	return int(n)
}

// readiness asks /readyz through client (which keeps its connection: the
// admin port may not accept a new one while descriptors run out).
func readiness(client *http.Client, admin string) (code int, accepting bool, acceptErr string, err error) {
	resp, err := client.Get("http://" + admin + "/readyz")
	if err != nil {
		return 0, false, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rd struct {
		Accepting   bool   `json:"accepting"`
		AcceptError string `json:"accept_error"`
	}
	if err := json.Unmarshal(body, &rd); err != nil {
		return 0, false, "", err
	}
	return resp.StatusCode, rd.Accepting, rd.AcceptError, nil
}

// adminMetric reads one sample of /metrics through client (with its
// timeout and kept connection: http.Get's default client has no timeout,
// and a new connection waits in the accept queue while descriptors are
// short); ok is false when it cannot.
func adminMetric(client *http.Client, admin, name string) (float64, bool) {
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestADescriptorFloodDoesNotEndTheLocalSocket: a node whose descriptor
// limit is reached by a flood of local-socket connections keeps its accept
// loop (it used to end for good: "server stopped server=localsock ...
// accept4: too many open files"), says it is not ready while it cannot
// accept and counts the failures, and once the flood ends it is ready again
// and a new engine connects and works.
func TestADescriptorFloodDoesNotEndTheLocalSocket(t *testing.T) {
	t.Parallel()
	sockPath := filepath.Join(testutil.SocketDir(t), "kv.sock")
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--socket", sockPath)
	admin := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}, Timeout: 10 * time.Second}
	defer admin.CloseIdleConnections()
	if code, _, _, err := readiness(admin, n.admin); err != nil || code != 200 {
		t.Fatalf("readyz before the flood: %d %v", code, err)
	}
	limit := limitDescriptors(t, n.Pid(), 48)

	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range limit + 64 {
		c, err := net.DialTimeout("unix", sockPath, 2*time.Second)
		if err != nil {
			break // the listen queue is full too
		}
		flood = append(flood, c)
	}
	t.Logf("descriptor limit %d; %d local connections opened", limit, len(flood))
	n.waitLog(t, reCannotAccept, 30*time.Second)
	t.Log("the node logged that it cannot accept")
	testutil.Eventually(t, "readiness to turn off while the socket cannot accept", 30*time.Second, func() bool {
		code, accepting, why, err := readiness(admin, n.admin)
		return err == nil && code == 503 && !accepting && strings.Contains(why, "localsock")
	})
	if v, ok := adminMetric(admin, n.admin, `kvring_accept_errors_total{listener="localsock"}`); ok && v < 1 {
		t.Fatalf("kvring_accept_errors_total{listener=\"localsock\"} = %v during the flood, want > 0", v)
	}

	t.Log("the node reports not ready; ending the flood")
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	testutil.Eventually(t, "readiness to come back once the flood ended", 30*time.Second, func() bool {
		code, accepting, _, err := readiness(admin, n.admin)
		return err == nil && code == 200 && accepting
	})
	t.Log("the node is ready again")
	if strings.Contains(n.logs(), "server stopped") {
		t.Fatalf("a server loop ended during the flood:\n%s", n.logs())
	}
	c, err := local.Dial(t.Context(), local.Config{Path: sockPath, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("a new engine cannot connect after the flood: %v\n%s", err, n.logs())
	}
	defer c.Close()
	b, err := c.CreateBlob(4096)
	if err != nil {
		t.Fatalf("a new engine cannot create a blob after the flood: %v", err)
	}
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	if v, ok := adminMetric(admin, n.admin, `kvring_accept_starved{listener="localsock"}`); !ok || v != 0 {
		t.Fatalf("kvring_accept_starved{listener=\"localsock\"} = %v (found %v) after the flood, want 0", v, ok)
	}
}

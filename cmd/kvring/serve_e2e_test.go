package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/launch"
	"github.com/kvring/kvring/internal/testutil"
)

// e2eBinaryEnv names a kvring binary for the e2e tests to use instead of
// building one (a test binary that re-executes itself passes its own on).
const e2eBinaryEnv = "KVRING_E2E_BINARY"

// buildBinary compiles cmd/kvring once per test binary run, into the run's
// scratch directory (see TestMain), unless e2eBinaryEnv names a binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv(e2eBinaryEnv); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "kvring-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kvring")
	out, err := testutil.CombinedOutput(exec.Command("go", "build", "-race", "-o", bin, "."))
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

// kvringBinary returns the kvring binary for a test that runs it (an e2e
// test), building it the first time. Under -short (make test-short) it skips
// the test instead: e2e tests take most of the suite's time, and make test
// runs them all.
func kvringBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("an e2e test (it runs the kvring binary): skipped by -short; make test runs it")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatalf("cannot build kvring: %v", err)
	}
	return bin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// proc is a running kvring process with its output (launch.Process).
type proc struct{ *launch.Process }

func (p *proc) logs() string { return p.Logs() }

// awaitLog waits until a line of the process's log matches re and returns
// the match. It returns nil when the process exits first (exited is true) or
// timeout passes. It wakes on each new line, not on a timer.
func (p *proc) awaitLog(re *regexp.Regexp, timeout time.Duration) (m []string, exited bool) {
	return p.AwaitLog(re, timeout)
}

// waitLog waits for a line matching re (see awaitLog) and fails the test
// with the log when the process exits first or timeout passes.
func (p *proc) waitLog(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	m, exited := p.awaitLog(re, timeout)
	switch {
	case exited:
		t.Fatalf("kvring exited before logging %q:\n%s", re, p.logs())
	case m == nil:
		t.Fatalf("kvring did not log %q within %v:\n%s", re, timeout, p.logs())
	}
	return m
}

// startKvring runs the kvring binary with args (launch.Spawn: it dies with
// the test binary) and kills it when the test ends. Nodes started this way
// serve no local socket and no Redis port unless env or args ask: tests
// that need a node with the usual test flags use startNode.
func startKvring(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startKvringBin(t, kvringBinary(t), env, args...)
}

// startKvringBin is startKvring with another kvring binary (an earlier
// release's: upgrade_e2e_test.go).
func startKvringBin(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	// No local socket unless the test asks: nodes share the working directory.
	p, err := launch.Spawn(launch.Command{Args: append([]string{bin}, args...),
		Env: append(append(os.Environ(), "KVRING_SOCKET=", "KVRING_RESP_ADDR="), env...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &proc{p}
}

// shmDir is a directory for a node's segments in /dev/shm, removed when
// the test ends.
func shmDir(t *testing.T) string { return testutil.ShmDir(t, "e2e-") }

var adminRe = regexp.MustCompile(`msg="node ready".* admin=(\S+)`)

// TestServeStartsServesAndStopsCleanly starts the real binary with defaults
// for everything but the ports (picked by the kernel: the default ports may
// be taken by another run) and directories, checks the admin API, sends
// SIGTERM and expects a clean exit 0 with the shutdown logged.
func TestServeStartsServesAndStopsCleanly(t *testing.T) {
	data := t.TempDir()
	p := startKvring(t, []string{"KVRING_MEMORY_LIMIT=64MiB"}, "serve", "--grpc-addr", "127.0.0.1:0",
		"--gossip-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir", data, "--shm-dir", shmDir(t))
	addr := p.waitLog(t, adminRe, 30*time.Second)[1]

	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/v1/stats": 200, "/v1/nope": 404} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d: %s", path, resp.StatusCode, want, body)
		}
		if !json.Valid(body) {
			t.Errorf("GET %s: body is not JSON: %s", path, body)
		}
		if path == "/v1/stats" {
			var st struct {
				LimitBytes int64 `json:"limit_bytes"`
			}
			json.Unmarshal(body, &st)
			if st.LimitBytes != 64<<20 {
				t.Errorf("limit_bytes = %d, want %d (KVRING_MEMORY_LIMIT)", st.LimitBytes, 64<<20)
			}
		}
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("kvring did not exit after SIGTERM:\n%s", p.logs())
	}
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, p.logs())
	}
	for _, want := range []string{"shutting down", "store closed", "node stopped"} {
		if !strings.Contains(p.logs(), want) {
			t.Errorf("log lacks %q:\n%s", want, p.logs())
		}
	}
	if _, err := os.Stat(filepath.Join(data, "catalog.db")); err != nil {
		t.Errorf("catalog not written: %v", err)
	}
}

// TestServeRejectsBadConfigurationWithAClearMessage: a bad flag value or
// environment variable exits non-zero with one line naming the problem.
func TestServeRejectsBadConfigurationWithAClearMessage(t *testing.T) {
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"serve", "--memory-limit", "lots"}, `size "lots"`},
		{[]string{"KVRING_MEMORY_LIMIT=-1"}, []string{"serve"}, "KVRING_MEMORY_LIMIT"},
		{nil, []string{"serve", "--log-format", "xml"}, `log format "xml"`},
		{nil, []string{"serve", "--admin-addr", "nonsense", "--data-dir", t.TempDir()}, "admin address"},
		{[]string{"KVRING_EVICTION_POLICY=fifo"}, []string{"serve", "--data-dir", t.TempDir()}, `eviction policy must be "lru" or "tinylfu", got "fifo"`},
	}
	for _, c := range cases {
		p := startKvring(t, c.env, c.args...)
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: kvring did not exit", c.args)
		}
		if p.ExitCode() == 0 {
			t.Errorf("%v %v: exit 0, want failure", c.env, c.args)
		}
		if !strings.Contains(p.logs(), c.want) || strings.Contains(p.logs(), "goroutine ") {
			t.Errorf("%v %v: output %q should name %q without a stack trace", c.env, c.args, p.logs(), c.want)
		}
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// summaryPass is in the summary line of a run that found nothing wrong.
const summaryPass = "lost 0, corrupt 0, late calls 0, phantom holders 0"

// TestARunSIGKILLedMidRunIsSweptByTheNextWhichPasses: the real binary,
// SIGKILLed once its cluster is up, cleans nothing (its namespaces, segment
// directories, scratch directory and lock file stay); the next run removes
// all of it, starts and passes.
func TestARunSIGKILLedMidRunIsSweptByTheNextWhichPasses(t *testing.T) {
	requireNetns(t)
	kvring, bin := buildKvring(t), buildNetfault(t)
	first := startHarness(t, bin, kvring, nil, "-schedule", "quiet:5m")
	first.waitFor(t, "cluster formed")
	run1 := runIDOf(t, first.out.String())
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.wait(t, time.Minute)
	if got := namespacesOf(t, run1); len(got) != 4 {
		t.Fatalf("after SIGKILL, want the first run's 4 namespaces left (switch, control, 2 nodes), got %v", got)
	}
	for _, p := range []string{lockPath(run1), filepath.Join("/dev/shm", run1+"-n0"), filepath.Join(os.TempDir(), run1)} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("after SIGKILL, want the first run's %s left: %v", p, err)
		}
	}

	second := startHarness(t, bin, kvring, nil, "-schedule", "quiet:5s")
	code := second.wait(t, 4*time.Minute)
	out := second.out.String()
	if code != 0 || !strings.Contains(out, summaryPass) {
		t.Fatalf("the run after a SIGKILLed one exited %d; output:\n%s", code, out)
	}
	assertGone(t, run1, os.TempDir())
	assertCleanedUp(t, out)
}

// TestARunNeverSweepsALiveRun: a run that starts while another is live, with
// another $TMPDIR (so the other's pid file is out of its sight), leaves the
// live run alone, and both pass. Before the runs' locks, the second took the
// first for a dead run, killed its processes and deleted its namespaces: the
// first exited 2 ("signal: killed") without its summary line.
func TestARunNeverSweepsALiveRun(t *testing.T) {
	requireNetns(t)
	kvring, bin := buildKvring(t), buildNetfault(t)
	otherTmp := t.TempDir()
	first := startHarness(t, bin, kvring, []string{"TMPDIR=" + otherTmp}, "-schedule", "quiet:20s")
	first.waitFor(t, "cluster formed")
	second := startHarness(t, bin, kvring, nil, "-schedule", "quiet:3s")
	// The second run logs its id once its sweep is done and its namespaces
	// are up; the first must still be running then, or the test proves nothing.
	second.waitFor(t, "] run ")
	if first.exited() {
		t.Fatalf("the first run ended before the second swept; output:\n%s", first.out.String())
	}
	for _, h := range []*harness{second, first} {
		code := h.wait(t, 4*time.Minute)
		if out := h.out.String(); code != 0 || !strings.Contains(out, summaryPass) {
			t.Fatalf("a run exited %d; output:\n%s", code, out)
		}
	}
	assertGone(t, runIDOf(t, first.out.String()), otherTmp)
	assertCleanedUp(t, second.out.String())
}

// buildNetfault builds this harness into the test's scratch directory.
func buildNetfault(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "netfault")
	if out, err := testutil.CombinedOutput(exec.Command("go", "build", "-o", bin, ".")); err != nil {
		t.Fatalf("cannot build netfault: %v\n%s", err, out)
	}
	return bin
}

// harness is a run of the netfault binary.
type harness struct {
	cmd  *exec.Cmd
	out  testutil.Logs
	done chan struct{}
}

// startHarness starts bin with a small cluster (2 nodes, one engine, 2 s
// of warm-up) and args, its environment plus env. A run still going when
// the test ends gets SIGTERM, which makes it clean up.
func startHarness(t *testing.T, bin, kvring string, env []string, args ...string) *harness {
	t.Helper()
	h := &harness{done: make(chan struct{})}
	args = append([]string{"-kvring", kvring, "-nodes", "2", "-engines", "1", "-warm", "2s", "-settle", "30s"}, args...)
	h.cmd = exec.Command(bin, args...)
	h.cmd.Env = append(os.Environ(), env...)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := testutil.Start(h.cmd); err != nil {
		t.Fatalf("cannot start netfault: %v", err)
	}
	go func() {
		h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		if h.exited() {
			return
		}
		h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(time.Minute):
			h.cmd.Process.Kill()
			<-h.done
		}
	})
	return h
}

func (h *harness) exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// waitFor waits for a line of output containing s, failing the test when
// the run ends first or 2 minutes pass.
func (h *harness) waitFor(t *testing.T, s string) {
	t.Helper()
	testutil.Eventually(t, "netfault to print "+s, 2*time.Minute, func() bool {
		return strings.Contains(h.out.String(), s) || h.exited()
	})
	if !strings.Contains(h.out.String(), s) {
		t.Fatalf("netfault ended without printing %q; output:\n%s", s, h.out.String())
	}
}

// wait waits up to timeout for the run to end and returns its exit status.
func (h *harness) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(timeout):
		t.Fatalf("netfault did not end within %v; output:\n%s", timeout, h.out.String())
	}
	return h.cmd.ProcessState.ExitCode()
}

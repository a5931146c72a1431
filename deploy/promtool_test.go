package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needPromtool returns promtool's path. Without it the test is skipped,
// unless KVRING_REDIS_TEST=1 (.ci/run sets it once scripts/test-deps.sh
// has installed the Debian test tools, promtool among them), which makes
// that a failure.
func needPromtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("KVRING_REDIS_TEST") == "1" {
			t.Fatalf("promtool is missing (%v) and KVRING_REDIS_TEST=1: apt-get install prometheus", err)
		}
		t.Skipf("promtool is missing (%v): apt-get install prometheus, or set KVRING_REDIS_TEST=1 to fail instead", err)
	}
	return path
}

// TestAlertRulesPassPromtool: the alert rules load in Prometheus's own
// checker, and promtool's unit tests of them (prometheus/testdata) pass:
// KvringWrittenNeverRead fires for a namespace that is written and read
// with no hit for 30 minutes, summed over nodes, and not for one that hits,
// one nobody reads, or once hits come back. The same tests fail against a
// rule that counts misses as hits: they check the rule, not just its syntax.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := needPromtool(t)
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(".", "check", "rules", "prometheus/alerts.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, err := os.ReadFile("prometheus/testdata/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tests), "alertname: KvringWrittenNeverRead") {
		t.Fatal("prometheus/testdata/alerts_test.yaml does not test KvringWrittenNeverRead")
	}
	if out, err := run("prometheus/testdata", "test", "rules", "alerts_test.yaml"); err != nil || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// The broken rule: hits are read from the misses' series.
	rules, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const hits = `kvring_resp_namespace_reads_total{job="kvring", result="hit"}`
	if !strings.Contains(string(rules), hits) {
		t.Fatalf("alerts.yaml no longer reads %s", hits)
	}
	dir := t.TempDir()
	broken := strings.Replace(string(rules), hits, strings.Replace(hits, "hit", "miss", 1), 1)
	if err := os.Mkdir(filepath.Join(dir, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "testdata", "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(filepath.Join(dir, "testdata"), "test", "rules", "alerts_test.yaml"); err == nil {
		t.Fatalf("promtool test rules passed a rule that counts misses as hits:\n%s", out)
	}
}

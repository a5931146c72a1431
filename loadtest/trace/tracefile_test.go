package trace

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// defaultTracePath is the Mooncake trace shipped as test data, with its licence
// (testdata/LICENSE-APACHE.mooncake).
const defaultTracePath = "testdata/synthetic_trace.jsonl"

// syntheticTrace parses the Mooncake synthetic trace once for all tests.
var syntheticTrace = sync.OnceValues(func() ([]Request, error) {
	return ReadFile(syntheticTracePath())
})

func syntheticTracePath() string {
	if p := os.Getenv("KVRING_TRACE"); p != "" {
		return p
	}
	return defaultTracePath
}

// loadSyntheticTrace fails the test, never skips it, when the trace is missing: the
// reference figures are the point of these tests.
func loadSyntheticTrace(t *testing.T) []Request {
	t.Helper()
	p := syntheticTracePath()
	if _, err := os.Stat(p); err != nil {
		abs, _ := filepath.Abs(p)
		t.Fatalf("synthetic trace not found at %q (%s): it ships in loadtest/trace/testdata; "+
			"set KVRING_TRACE to use another copy: %v", p, abs, err)
	}
	reqs, err := syntheticTrace()
	if err != nil {
		t.Fatalf("cannot load synthetic trace: %v", err)
	}
	return reqs
}

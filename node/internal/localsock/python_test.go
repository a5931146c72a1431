package localsock

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// TestStockPythonClient runs testdata/vineyard_check.py, a Vineyard client
// written with Python's standard library only (recvmsg with SCM_RIGHTS,
// mmap), against the server: the protocol proven by a client that shares
// no code with it. Skipped when /usr/bin/python3 does not exist.
func TestStockPythonClient(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s: the cross-language check needs it (%v)", python, err)
	}
	st := testStore(t, 64<<20)
	s := startServer(t, st, nil)
	out, err := testutil.CombinedOutput(exec.Command(python, "testdata/vineyard_check.py", s.Path()))
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("vineyard_check.py: %v\n%s", err, out)
	}
	testutil.Eventually(t, "the Python client's blob to be freed", 10*time.Second, func() bool {
		return st.Stats().Blobs == 0 && s.Connections() == 0
	})
}

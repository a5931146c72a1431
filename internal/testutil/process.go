package testutil

import (
	"bytes"
	"os/exec"

	"go.uber.org/goleak"

	"github.com/kvring/kvring/internal/launch"
)

// Start starts cmd so that the process dies with the test binary, however
// the test binary ends (a failed test, a timeout's panic, SIGKILL):
// launch.StartProcess, which says how. Every process a test starts (a node,
// a CLI run, a build, redis-server) goes through Start, Run or
// CombinedOutput, so that no test leaves one running. Safe for concurrent
// use; blocks while the process is started.
func Start(cmd *exec.Cmd) error { return launch.StartProcess(cmd) }

// Run starts cmd as Start does and waits for it to exit, as cmd.Run.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// CombinedOutput runs cmd as Run does and returns its standard output and
// standard error together, as cmd.CombinedOutput.
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := Run(cmd)
	return b.Bytes(), err
}

// IgnoreStarter tells goleak.VerifyTestMain that the goroutine Start forks
// children from is meant to outlive the tests.
var IgnoreStarter = goleak.IgnoreAnyFunction("github.com/kvring/kvring/internal/launch.starter")

// ProcessGone reports whether process pid has exited (launch.ProcessGone).
func ProcessGone(pid int) bool { return launch.ProcessGone(pid) }

package testutil

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startFromAnEndingThread runs start on a goroutine locked to a thread
// other than the main one, which the runtime ends when the goroutine returns
// locked (it keeps the main thread), and waits until that thread is gone.
func startFromAnEndingThread(t *testing.T, start func() error) {
	t.Helper()
	tid := make(chan int, 1)
	errc := make(chan error, 1)
	hold := make(chan struct{}) // keeps the main thread busy until then
	defer close(hold)
	for {
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				tid <- 0
				<-hold
				runtime.UnlockOSThread()
				return
			}
			tid <- unix.Gettid()
			errc <- start() // and return locked: the thread ends
		}()
		if id := <-tid; id != 0 {
			task := "/proc/self/task/" + strconv.Itoa(id)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			Eventually(t, "the starting thread to end", 10*time.Second, func() bool {
				_, err := os.Stat(task)
				return errors.Is(err, os.ErrNotExist)
			})
			return
		}
	}
}

// TestAChildOutlivesTheThreadThatAskedForIt: Pdeathsig fires when the
// thread that forked a child ends, which happens in Go when a goroutine
// locked to its thread returns. A child started that way with cmd.Start is
// killed at once; one started through Start from the same kind of thread
// keeps running, and dies only with the test binary.
func TestAChildOutlivesTheThreadThatAskedForIt(t *testing.T) {
	t.Parallel()
	child := exec.Command("sleep", "60")
	startFromAnEndingThread(t, func() error { return Start(child) })
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })

	plain := exec.Command("sleep", "60")
	plain.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	startFromAnEndingThread(t, plain.Start)
	done := make(chan error, 1)
	go func() { done <- plain.Wait() }()
	select {
	case <-done:
		if ws := plain.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the plainly started child ended with %v, want SIGKILL", plain.ProcessState)
		}
	case <-time.After(30 * time.Second):
		plain.Process.Kill()
		<-done
		t.Fatal("a child forked by an ending thread was not killed: the hazard Start avoids is not there")
	}
	// The thread that asked for child ended before plain's did, and plain is dead.
	if ProcessGone(child.Process.Pid) {
		t.Fatal("the child started through Start died with the thread that asked for it")
	}
}

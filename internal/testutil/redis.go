package testutil

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// StartRedis starts Debian's redis-server with args first (a configuration
// file, if any, must be the first argument), then on a loopback port held
// for the whole test (HoldPort: no other test takes it before the server
// starts or after it is killed), without persistence and with its files in
// a temporary directory. It waits until the server listens and returns its
// address and a function that kills it and waits until it has exited (so
// its port refuses connections); the test's cleanup calls it too. Without
// the binary the test is skipped, or fails when KVRING_REDIS_TEST=1 (CI)
// asks for it.
func StartRedis(t testing.TB, args ...string) (addr string, kill func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KVRING_REDIS_TEST") == "1" {
			t.Fatalf("KVRING_REDIS_TEST=1 but redis-server is not on PATH (apt-get install redis-server): %v", err)
		}
		t.Skip("redis-server is not on PATH; install it (apt-get install redis-server) and set KVRING_REDIS_TEST=1 to require this test")
	}
	hold, err := HoldPort("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	addr = hold.Addr()
	cmd := exec.Command(bin, append(append([]string(nil), args...), "--bind", "127.0.0.1", "--port", strconv.Itoa(hold.Port()),
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := Start(cmd); err != nil {
		t.Fatalf("cannot start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	kill = func() {
		cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(kill)
	Eventually(t, "redis-server to listen on "+addr, 10*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("redis-server %v exited: %s", args, out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr, kill
}

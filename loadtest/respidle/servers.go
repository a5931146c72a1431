package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kvring/kvring/internal/launch"
)

// server is a process under test: a kvring node or a redis-server.
type server struct {
	name  string
	cmd   *exec.Cmd       // redis-server's (nil for kvring)
	kv    *launch.Cluster // kvring's (nil for redis-server)
	pid   int
	addr  string // its Redis-protocol address
	admin string // kvring's admin address ("" for redis-server)
	dirs  []string
	done  chan struct{}
}

// startKvring starts `kvring serve` (internal/launch: loopback ports the
// kernel picks, its segments in a fresh /dev/shm directory) with runtime
// profiles on (the settle forces a GC through /debug/pprof/heap?gc=1) and a
// Redis-protocol port, and waits until it is ready.
func startKvring(bin, memory string, extra ...string) (*server, error) {
	c, err := launch.Start(context.Background(), launch.Config{Binary: bin, MemoryLimit: memory, RESP: true,
		Flags: append([]string{"--pprof", "--log-level", "info"}, extra...)})
	if err != nil {
		return nil, err
	}
	n := c.Node(0)
	return &server{name: "kvring", kv: c, pid: n.Pid(), addr: n.RESP, admin: n.Admin}, nil
}

// startRedis starts redis-server on a free loopback port (no persistence,
// room for maxClients clients) and waits until it answers PING.
func startRedis(bin string, maxClients int) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kvring-respidle-redis-")
	if err != nil {
		return nil, err
	}
	s := &server{name: "redis-server", addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dirs: []string{dir},
		done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--maxclients", strconv.Itoa(maxClients), "--maxmemory", "1gb", "--maxmemory-policy", "allkeys-lru")
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		s.stop()
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	s.pid = s.cmd.Process.Pid
	go s.watch(stdout)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if c, err := dialPing(s.addr); err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("redis-server exited before it answered")
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.stop()
	return nil, fmt.Errorf("redis-server did not answer within 10 s")
}

// watch reads the process's output until it ends, then reaps the process.
func (s *server) watch(r io.Reader) {
	io.Copy(io.Discard, r)
	s.cmd.Wait()
	close(s.done)
}

// stop ends the process (kvring: SIGTERM, then SIGKILL after its stop
// timeout; redis-server: SIGTERM, then SIGKILL after 10 s) and removes its
// directories.
func (s *server) stop() {
	if s.kv != nil {
		s.kv.Stop()
		s.kv.Close()
		return
	}
	if s.cmd.Process != nil {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				s.cmd.Process.Kill()
				<-s.done
			}
		}
	}
	for _, d := range s.dirs {
		os.RemoveAll(d)
	}
}

// settle lets the server return what it freed: kvring is made to collect
// its garbage twice (which also shrinks goroutine stacks); redis-server
// frees as it goes.
func (s *server) settle() error {
	if s.admin == "" {
		return nil
	}
	for range 2 {
		resp, err := http.Get("http://" + s.admin + "/debug/pprof/heap?gc=1")
		if err != nil {
			return fmt.Errorf("cannot force a GC: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}

// rss is the server's resident memory (VmRSS), in bytes.
func (s *server) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.pid)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

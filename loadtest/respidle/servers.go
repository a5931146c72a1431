package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// server is a process under test: a kvring node or a redis-server.
type server struct {
	name  string
	cmd   *exec.Cmd
	addr  string // its Redis-protocol address
	admin string // kvring's admin address ("" for redis-server)
	dirs  []string
	done  chan struct{}
}

var readyRe = regexp.MustCompile(`msg="node ready" .*admin=(\S+) .*resp=(\S+)`)

// startKvring starts `kvring serve` on loopback ports the kernel picks,
// with its segments in a fresh /dev/shm directory and runtime profiles on
// (the settle forces a GC through /debug/pprof/heap?gc=1), and waits for
// "node ready".
func startKvring(bin, memory string, extra ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "kvring-respidle-")
	if err != nil {
		return nil, err
	}
	shm, err := os.MkdirTemp("/dev/shm", "kvring-respidle-")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := append([]string{"serve", "--data-dir", filepath.Join(dir, "data"), "--shm-dir", shm,
		"--memory-limit", memory, "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0", "--socket", "", "--pprof",
		"--log-level", "info"}, extra...)
	s := &server{name: "kvring", cmd: exec.Command(bin, args...), dirs: []string{dir, shm}, done: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		s.stop()
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	ready := make(chan []string, 1)
	go s.watch(stderr, readyRe, ready)
	select {
	case m := <-ready:
		s.admin, s.addr = m[1], m[2]
		return s, nil
	case <-s.done:
		s.stop()
		return nil, fmt.Errorf("kvring exited before it was ready")
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, fmt.Errorf("kvring was not ready within 60 s")
	}
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
	go s.watch(stdout, nil, nil)
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

// watch reads the process's output until it ends (sending re's first
// match to ready), then reaps the process.
func (s *server) watch(r io.Reader, re *regexp.Regexp, ready chan<- []string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if re == nil {
			continue
		}
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			select {
			case ready <- m:
			default:
			}
		}
	}
	s.cmd.Wait()
	close(s.done)
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and removes its
// directories.
func (s *server) stop() {
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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

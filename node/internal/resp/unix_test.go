package resp

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/internal/testutil"
)

// unixServer serves a RESP port on a TCP listener and a Unix socket at
// once, over a fake cluster, until the test ends.
func unixServer(t *testing.T, mod func(*Config, *fakeCluster)) (s *Server, path string) {
	t.Helper()
	cfg, _ := testConfig(t, mod)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(testutil.SocketDir(t), "r.sock")
	ul, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return serveUntilCleanup(t, cfg, tcp, ul), path
}

// TestAUnixSocketServesTheSameCommandsAuthAndLimits: a value SET through
// the Unix socket is read through TCP and back; the socket asks for AUTH
// as TCP does; CLIENT INFO shows a Unix client as Redis does; and the
// connection cap counts the connections of both listeners.
func TestAUnixSocketServesTheSameCommandsAuthAndLimits(t *testing.T) {
	s, path := unixServer(t, func(cfg *Config, fc *fakeCluster) {
		cfg.MaxConns = 2
		fc.tokens = map[string]Access{"secret": {}}
	})
	ctx := context.Background()
	uc := redis.NewClient(&redis.Options{Network: "unix", Addr: path, Password: "secret", PoolSize: 1, MaxRetries: -1})
	defer uc.Close()
	tc := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Password: "secret", PoolSize: 1, MaxRetries: -1})
	defer tc.Close()
	if err := uc.Set(ctx, "m@1@0@abc@bfloat16kv_bytes", "through the socket", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := tc.Get(ctx, "m@1@0@abc@bfloat16kv_bytes").Result(); err != nil || v != "through the socket" {
		t.Fatalf("GET through TCP of a value SET through the socket = %q, %v", v, err)
	}
	if err := tc.Set(ctx, "k", "through TCP", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := uc.Get(ctx, "k").Result(); err != nil || v != "through TCP" {
		t.Fatalf("GET through the socket = %q, %v", v, err)
	}
	info, err := uc.ClientInfo(ctx).Result()
	if err != nil || info.Addr != path+":0" || !strings.Contains(uc.Do(ctx, "CLIENT", "INFO").String(), "flags=U") {
		t.Fatalf("CLIENT INFO through the socket: %+v, %v; want addr %s:0 and flag U", info, err, path)
	}
	// Two connections are open (one each): a third, on either listener, is refused.
	for _, network := range []string{"unix", "tcp"} {
		addr := path
		if network == "tcp" {
			addr = s.Addr().String()
		}
		nc, err := net.Dial(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(nc).ReadString('\n')
		nc.Close()
		if line != "-ERR max number of clients reached\r\n" {
			t.Fatalf("a third connection, through %s: %q, want the cap's refusal", network, line)
		}
	}
	// Without AUTH, the socket refuses commands as TCP does.
	uc.Close()
	tc.Close()
	testutil.Eventually(t, "the clients' connections to close", 10*time.Second, func() bool { return s.Connections() == 0 })
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte("GET k\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(nc).ReadString('\n'); !strings.HasPrefix(line, "-NOAUTH") {
		t.Fatalf("GET through the socket before AUTH: %q, want -NOAUTH", line)
	}
}

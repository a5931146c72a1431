package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// advertisedMaxStreams connects to a gRPC server and returns the
// SETTINGS_MAX_CONCURRENT_STREAMS it advertises (0: none).
func advertisedMaxStreams(t *testing.T, addr string) uint32 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // bounds a hang; not a wait
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			v, _ := s.Value(http2.SettingMaxConcurrentStreams)
			return v
		}
	}
}

// TestConnectionLimitsComeFromFlagsEnvironmentAndFile: the connection
// limits are ordinary serve flags, so a YAML key and a KVRING_* variable set
// them like any other; the running node advertises the streams limit from
// the file and enforces the admin header limit from the environment.
func TestConnectionLimitsComeFromFlagsEnvironmentAndFile(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "kvring.yaml")
	if err := os.WriteFile(conf, []byte("grpc-max-streams: 7\ngrpc-max-conn-idle: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startKvring(t, []string{"KVRING_ADMIN_MAX_HEADER_SIZE=4KiB"},
		serveArgs(t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--config", conf)...)
	m := p.waitLog(t, readyRe, 60*time.Second)
	grpcAddr, admin := m[2], m[3]
	if got := advertisedMaxStreams(t, grpcAddr); got != 7 {
		t.Fatalf("the node advertises %d concurrent streams per connection, want 7 from the config file", got)
	}

	// net/http allows MaxHeaderBytes plus 4 KiB of slack: 64 KiB of
	// headers pass the default limit but not 4 KiB.
	req, err := http.NewRequest("GET", "http://"+admin+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("x", 32<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("32 KiB of headers with a 4 KiB limit: %s, want 431", resp.Status)
	}
	resp, err = http.Get("http://" + admin + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
}

// TestBadConnectionLimitsFailInOneLine: limits that would break the node
// stop serve at once, naming the setting.
func TestBadConnectionLimitsFailInOneLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grpc-keepalive-min-time", "1m"}, "keepalive min time"},
		{[]string{"--grpc-max-recv-msg-size", "64KiB"}, "max receive message size"},
		{[]string{"--pprof", "--admin-write-timeout", "20s"}, "pprof"},
		{[]string{"--grpc-max-streams", "-3"}, "max streams per connection"},
	} {
		args := serveArgs(t.TempDir(), t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", c.args...)
		checkOneLineFailure(t, runCLI(t, nil, args...), c.want)
	}
}

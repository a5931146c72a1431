package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
)

// TestADescriptorFloodOnTheGRPCPortLeavesItServing: TCP connections to the
// gRPC port (no credentials needed) that take every descriptor a node has
// left make its gRPC listener fail to accept; the node logs it, counts the
// failures, says it is not ready while it cannot accept (it used to stay
// ready), and once the flood ends it is ready again and an engine's put is
// stored.
func TestADescriptorFloodOnTheGRPCPortLeavesItServing(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	admin := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}, Timeout: 10 * time.Second}
	defer admin.CloseIdleConnections()
	if code, _, _, err := readiness(admin, n.admin); err != nil || code != 200 {
		t.Fatalf("readyz before the flood: %d %v", code, err)
	}
	limit := limitDescriptors(t, n.Pid(), 48)
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range limit + 64 {
		c, err := net.DialTimeout("tcp", n.grpc, 2*time.Second)
		if err != nil {
			break // the listen queue is full too
		}
		flood = append(flood, c)
	}
	t.Logf("descriptor limit %d; %d TCP connections to the gRPC port opened", limit, len(flood))
	n.waitLog(t, regexp.MustCompile(`cannot accept connections.*listener=grpc`), 30*time.Second)
	testutil.Eventually(t, "readiness to turn off while the gRPC port cannot accept", 30*time.Second, func() bool {
		code, accepting, why, err := readiness(admin, n.admin)
		return err == nil && code == 503 && !accepting && strings.Contains(why, "grpc")
	})
	if v, ok := adminMetric(admin, n.admin, `kvring_accept_errors_total{listener="grpc"}`); !ok || v < 1 {
		t.Fatalf("kvring_accept_errors_total{listener=\"grpc\"} = %v (found %v) during the flood, want > 0", v, ok)
	}
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	testutil.Eventually(t, "readiness to come back once the flood ended", 30*time.Second, func() bool {
		code, accepting, _, err := readiness(admin, n.admin)
		return err == nil && code == 200 && accepting
	})
	c, _ := newEngine(t, []string{n.grpc}, 1, 1)
	testutil.Eventually(t, "an engine to connect after the flood", 30*time.Second, func() bool {
		return c.State().Status == client.ConnConnected
	})
	if res, err := c.Put(context.Background(), []client.Chunk{e2eChunk(1, 4096)}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("a put after the flood: %v %+v", err, res)
	}
}

// TestA32MiBSocketRequestLeavesTheNodesMemoryBounded: one 32 MiB
// get_buffers_request on the local socket raised a node's peak RSS from
// 195 MiB to 1,562 MiB (its ids decoded through maps of raw JSON). Now it
// is refused while it is scanned, the node's peak RSS grows by about twice
// the frame (the frame, read into a buffer that doubles up to its length,
// about 1.5× allocated, and the heap's slack), under three times, and the
// connection keeps serving.
func TestA32MiBSocketRequestLeavesTheNodesMemoryBounded(t *testing.T) {
	t.Parallel()
	sockPath := filepath.Join(testutil.SocketDir(t), "kv.sock")
	// Built without -race: the race detector's shadow memory would triple
	// the RSS this measures.
	n := startBenchNode(t, "256MiB", "--socket", sockPath)
	c, err := net.Dial("unix", sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func(body []byte) map[string]any {
		t.Helper()
		var hdr [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(body)))
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		if _, err := c.Write(append(hdr[:], body...)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
		if _, err := io.ReadFull(c, reply); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(reply, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := call([]byte(`{"type":"register_request","version":"0.7.2","store_type":"Normal"}`)); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	var big bytes.Buffer
	big.WriteString(`{"type":"get_buffers_request","unsafe":false,"ids":[`)
	for i := 0; big.Len() < 32<<20; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(strconv.FormatUint(1<<63|uint64(i)*7919, 10))
	}
	big.WriteString("]}")
	before := peakRSS(t, n.Pid())
	m := call(big.Bytes())
	grown := peakRSS(t, n.Pid()) - before
	t.Logf("a %.1f MiB request: %v; the node's peak RSS grew %.1f MiB (from %.1f MiB)", float64(big.Len())/(1<<20), m["message"],
		float64(grown)/(1<<20), float64(before)/(1<<20))
	if _, typed := m["type"]; typed || !strings.Contains(fmt.Sprint(m["message"]), "ids") {
		t.Fatalf("the 32 MiB request was answered %v, want an error reply naming the id limit", m)
	}
	if grown > 3*int64(big.Len()) {
		t.Fatalf("the node's peak RSS grew %d MiB for a %d MiB request, want under 3× the frame", grown>>20, big.Len()>>20)
	}
	if m := call([]byte(`{"type":"get_buffers_request","unsafe":false,"ids":[9223372036854775813]}`)); m["type"] != "get_buffers_reply" {
		t.Fatalf("the connection does not serve after the refusal: %v", m)
	}
}

// peakRSS is the peak resident memory of process pid (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

package node

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// limitedNode starts a one-node test cluster whose gRPC server allows
// maxStreams streams per connection and closes connections idle for
// maxIdle (0: the default).
func limitedNode(t *testing.T, maxStreams int, maxIdle time.Duration) *testNode {
	t.Helper()
	tc := newTestClusterWith(t, 1, 64<<20, func(_ int, cfg *Config) {
		cfg.MaxStreamsPerConn = maxStreams
		cfg.MaxConnIdle = maxIdle
	})
	return tc.nodes[0]
}

// rawH2 is an HTTP/2 client that speaks frames directly, so it can ignore
// the server's SETTINGS, as a hostile or broken client would.
type rawH2 struct {
	t    *testing.T
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
	// maxStreams is the server's SETTINGS_MAX_CONCURRENT_STREAMS.
	maxStreams uint32
}

func dialRawH2(t *testing.T, addr string) *rawH2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Bounds a test that would otherwise hang on a read; not a wait.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &rawH2{t: t, fr: http2.NewFramer(conn, conn)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f := c.read()
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			v, ok := s.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				t.Fatal("the server's SETTINGS carry no MAX_CONCURRENT_STREAMS")
			}
			c.maxStreams = v
			if err := c.fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

func (c *rawH2) read() http2.Frame {
	c.t.Helper()
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	if g, ok := f.(*http2.GoAwayFrame); ok {
		c.t.Fatalf("the server sent GOAWAY %v %q", g.ErrCode, g.DebugData())
	}
	return f
}

// openPut opens stream id as a Cache.Put call; endStream also half-closes
// it, so the server's handler sees the end of the requests at once.
func (c *rawH2) openPut(id uint32, endStream bool) {
	c.t.Helper()
	c.hbuf.Reset()
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/kvring.v1.Cache/Put"},
		{":authority", "kvring"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		c.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(),
		EndHeaders: true, EndStream: endStream}); err != nil {
		c.t.Fatal(err)
	}
}

// awaitEnd reads frames until stream id ends, and reports how: refused
// (RST_STREAM REFUSED_STREAM) or answered with trailers (the handler ran).
// Other streams' ends are recorded in ended.
func (c *rawH2) awaitEnd(id uint32, ended map[uint32]string) string {
	c.t.Helper()
	for ended[id] == "" {
		switch f := c.read().(type) {
		case *http2.RSTStreamFrame:
			ended[f.StreamID] = "reset " + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				ended[f.StreamID] = "answered " + f.PseudoValue("status") + " grpc-status " + headerValue(f, "grpc-status")
			}
		}
	}
	return ended[id]
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.RegularFields() {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// TestStreamsPastMaxStreamsPerConnAreRefused: the server advertises
// MaxStreamsPerConn, and a client that ignores it and opens three times as
// many Put streams on one connection has exactly the streams past the limit
// refused while the first ones stay open in their handlers; once one of
// those ends, a new stream is served again.
func TestStreamsPastMaxStreamsPerConnAreRefused(t *testing.T) {
	t.Parallel()
	const limit = 4
	nd := limitedNode(t, limit, 0)
	c := dialRawH2(t, nd.addr)
	if c.maxStreams != limit {
		t.Fatalf("the server advertises %d concurrent streams, want %d", c.maxStreams, limit)
	}

	// Streams 1, 3, ..., 23: the handlers of the first four wait for a
	// PutBegin that never comes.
	var ids []uint32
	for i := range 3 * limit {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		c.openPut(id, false)
	}
	ended := map[uint32]string{}
	for _, id := range ids[limit:] {
		if got := c.awaitEnd(id, ended); got != "reset "+http2.ErrCodeRefusedStream.String() {
			t.Fatalf("stream %d past the limit: %s, want it refused", id, got)
		}
	}
	for _, id := range ids[:limit] {
		if got := ended[id]; got != "" {
			t.Fatalf("stream %d within the limit ended (%s) before its client did anything", id, got)
		}
	}

	// End stream 1's requests: its handler answers (no PutBegin is an
	// error) and its slot frees; a new stream is then served, not refused.
	if err := c.fr.WriteData(ids[0], true, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.awaitEnd(ids[0], ended); !strings.HasPrefix(got, "answered 200 grpc-status ") {
		t.Fatalf("stream %d after its requests ended: %s, want its handler's answer", ids[0], got)
	}
	next := ids[len(ids)-1] + 2
	c.openPut(next, true)
	if got := c.awaitEnd(next, ended); !strings.HasPrefix(got, "answered 200 grpc-status ") {
		t.Fatalf("a stream opened after a slot freed: %s, want it served", got)
	}
	for _, id := range ids[1:limit] {
		if got := ended[id]; got != "" {
			t.Fatalf("held stream %d ended (%s)", id, got)
		}
	}
}

// TestAGRPCClientQueuesCallsPastMaxStreamsPerConn: a gRPC client (as the
// SDK and peers are) respects the advertised limit: with MaxStreamsPerConn
// Put streams held open on one connection, further Puts on it wait instead
// of failing, and every one of them is served by the node once the held
// ones end. The node's put-duration histogram counts each served Put.
func TestAGRPCClientQueuesCallsPastMaxStreamsPerConn(t *testing.T) {
	t.Parallel()
	const limit, extra = 3, 9
	nd := limitedNode(t, limit, 0)
	cc, err := grpc.NewClient(nd.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cache := kvringv1.NewCacheClient(cc)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var held []grpc.BidiStreamingClient[kvringv1.PutRequest, kvringv1.PutResponse]
	for range limit {
		s, err := cache.Put(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	// Each queued Put sends nothing and closes: the node answers that a
	// PutBegin is missing, which proves its handler ran.
	var wg sync.WaitGroup
	errs := make(chan error, extra)
	for range extra {
		wg.Go(func() {
			s, err := cache.Put(ctx)
			if err == nil {
				s.CloseSend()
				_, err = s.Recv()
			}
			errs <- err
		})
	}
	for _, s := range held {
		s.CloseSend()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if code := status.Code(err); code != codes.InvalidArgument {
			t.Fatalf("a queued Put: %v, want the node's InvalidArgument for a missing PutBegin", err)
		}
	}
	for _, s := range held {
		if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a held Put: %v, want InvalidArgument", err)
		}
	}
	testutil.Eventually(t, "every put to be counted", 10*time.Second, func() bool { return putsServed(t, nd.reg) == limit+extra })
}

// putsServed is the count of kvring_request_duration_seconds{op="put"}.
func putsServed(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kvring_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "put" {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// gaugeValue is the value of the unlabelled gauge name.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestAnIdleConnectionIsClosed: a connection without a call in flight for
// MaxConnIdle is closed by the server (the node's connection gauge drops to
// zero and the client sees GOAWAY, going idle), while its calls before
// worked; a new call reconnects.
func TestAnIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	nd := limitedNode(t, 0, 200*time.Millisecond)
	cc, err := grpc.NewClient(nd.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cache := kvringv1.NewCacheClient(cc)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := cache.Lookup(ctx, &kvringv1.LookupRequest{}); status.Code(err) == codes.Unavailable {
		t.Fatalf("Lookup: %v", err)
	}
	testutil.Eventually(t, "the server to close the idle connection", 10*time.Second, func() bool {
		return gaugeValue(t, nd.reg, "kvring_grpc_connections") == 0
	})
	if _, err := cache.Lookup(ctx, &kvringv1.LookupRequest{}); status.Code(err) == codes.Unavailable {
		t.Fatalf("Lookup after the idle close: %v, want the client to reconnect", err)
	}
}

// TestConfigConnectionLimits: zero limits take the documented defaults, and
// limits that would break the node (too small for a frame, a keepalive
// policy that disconnects peers, a write timeout shorter than pprof's
// default profile) are errors naming them.
func TestConfigConnectionLimits(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	if cfg.MaxStreamsPerConn != 256 || cfg.MaxRecvMsgBytes != 4<<20 || cfg.KeepaliveMinTime != 5*time.Second ||
		cfg.KeepaliveTime != 30*time.Second || cfg.KeepaliveTimeout != 10*time.Second || cfg.MaxConnIdle != 30*time.Minute ||
		cfg.MaxConnAge != 0 || cfg.MaxConnAgeGrace != time.Minute || cfg.AdminReadTimeout != 30*time.Second ||
		cfg.AdminWriteTimeout != 2*time.Minute || cfg.AdminIdleTimeout != 2*time.Minute || cfg.AdminMaxHeaderBytes != 64<<10 {
		t.Fatalf("defaults: %+v", cfg)
	}
	if def.MaxStreamsPerConn != cfg.MaxStreamsPerConn || def.AdminWriteTimeout != cfg.AdminWriteTimeout {
		t.Fatal("DefaultConfig and the filled-in defaults differ")
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.MaxStreamsPerConn = -1 }, "max streams per connection"},
		{func(c *Config) { c.MaxRecvMsgBytes = 1 << 20 }, "max receive message size"},
		{func(c *Config) { c.MaxBatchChunks = 100_000 }, "max-batch=100000"},
		{func(c *Config) { c.KeepaliveMinTime = 20 * time.Second }, "keepalive min time"},
		{func(c *Config) { c.KeepaliveTime = time.Millisecond }, "keepalive time"},
		{func(c *Config) { c.AdminMaxHeaderBytes = 100 }, "admin max header size"},
		{func(c *Config) { c.AdminIdleTimeout = -1 }, "admin idle timeout"},
		{func(c *Config) { c.EnablePprof, c.AdminWriteTimeout = true, 30*time.Second }, "pprof"},
	} {
		cfg := testNodeConfig(t)
		c.change(&cfg)
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error containing %q, got %v", c.want, err)
		}
	}
	// Negative durations mean no limit where documented.
	cfg = testNodeConfig(t)
	cfg.EnablePprof, cfg.AdminWriteTimeout, cfg.AdminReadTimeout, cfg.MaxConnIdle = true, -1, -1, -1
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s := n.adminServer(nil); s.WriteTimeout != 0 || s.ReadTimeout != 0 || s.IdleTimeout != 2*time.Minute ||
		s.MaxHeaderBytes != 64<<10 || s.ReadHeaderTimeout != 10*time.Second {
		t.Fatalf("admin server limits: write %s read %s idle %s header %d", s.WriteTimeout, s.ReadTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
}

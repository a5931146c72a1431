package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
)

// The hand-off against a plain gRPC stream, and what it costs the
// foreground (issue 19). Node A holds 128 MiB in 1 MiB chunks (R=1); node B
// joins and A copies B its share. Figures: the hand-off's MB/s (bytes copied
// over the pass's time) against one client stream between two gRPC servers
// in this process sending as many bytes in 1 MiB messages, with the same
// buffer sizes; and the p99 of a put (64 KiB) plus a lookup on B while the
// hand-off runs (paced to 64 MiB/s so it lasts) against the same loop after.
//
//	go test -run '^$' -bench Handoff -benchtime 1x ./node/

const (
	handoffChunks    = 128
	handoffChunkSize = 1 << 20
)

func BenchmarkHandoffVsStream(b *testing.B) {
	for range b.N {
		copied, took := runHandoff(b, -1, nil)
		handoff := float64(copied) / took.Seconds() / 1e6
		stream := plainStreamMBs(b, copied)
		b.ReportMetric(handoff, "handoff_MB/s")
		b.ReportMetric(stream, "stream_MB/s")
		b.ReportMetric(handoff/stream, "handoff/stream")
	}
}

func BenchmarkHandoffForegroundP99(b *testing.B) {
	for range b.N {
		var during, after []time.Duration
		runHandoff(b, 64<<20, func(c *client.Client, busy func() bool) {
			i := uint64(0)
			for busy() {
				during = append(during, foregroundCall(b, c, i))
				i++
			}
			for range max(len(during), 50) {
				after = append(after, foregroundCall(b, c, i))
				i++
			}
		})
		d, a := p99(during), p99(after)
		b.ReportMetric(float64(d.Microseconds())/1000, "p99_ms_during")
		b.ReportMetric(float64(a.Microseconds())/1000, "p99_ms_after")
		b.ReportMetric(float64(d)/float64(a), "during/after")
		b.ReportMetric(float64(len(during)), "calls_during")
	}
}

// runHandoff fills node A, starts node B joining it, and returns what A's
// hand-off pass copied and how long it took. fg, if set, runs against B
// while busy reports the hand-off still running, and after.
func runHandoff(b *testing.B, rate int64, fg func(c *client.Client, busy func() bool)) (int64, time.Duration) {
	b.Helper()
	cfgA := benchNodeConfig(b, rate)
	a := startNodeB(b, cfgA)
	ca := benchClient(b, a.GRPCAddr())
	for lo := 0; lo < handoffChunks; lo += 16 {
		var batch []client.Chunk
		for i := lo; i < lo+16; i++ {
			batch = append(batch, chunkOf(uint64(i), handoffChunkSize))
		}
		if _, err := ca.Put(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	before, _ := a.Handoff()
	cfgB := benchNodeConfig(b, rate)
	cfgB.Membership.Join = []string{a.GossipAddr()}
	nb := startNodeB(b, cfgB)
	done := func() bool {
		st, _ := a.Handoff()
		return st.Passes > before.Passes && !st.Running && st.CopiedBytes > 0 && st.Last.Pending == 0
	}
	if fg != nil {
		fg(benchClient(b, nb.GRPCAddr()), func() bool { return !done() })
	}
	testutil.Eventually(b, "the hand-off to B to end", 60*time.Second, done)
	st, _ := a.Handoff()
	return st.CopiedBytes, st.Last.Ended.Sub(st.Last.Started)
}

func benchNodeConfig(b *testing.B, rate int64) Config {
	cfg := testNodeConfig(b)
	cfg.Store.MemoryLimit = 512 << 20
	cfg.HandoffRate = rate
	cfg.Membership.SettleWindow = -1
	return cfg
}

func startNodeB(b *testing.B, cfg Config) *Node {
	b.Helper()
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close(context.Background()) })
	return n
}

func benchClient(b *testing.B, addr string) *client.Client {
	b.Helper()
	c, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{addr}}, Namespace: "bench/handoff",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, ReplicationFactor: 1, MinReplicas: 1,
		Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	testutil.Eventually(b, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return c
}

// foregroundCall is one engine step on the joining node: a 64 KiB put and a
// lookup of it.
func foregroundCall(b *testing.B, c *client.Client, i uint64) time.Duration {
	ch := chunkOf(1<<40+i, 64<<10)
	start := time.Now()
	if _, err := c.Put(context.Background(), []client.Chunk{ch}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Lookup(context.Background(), []client.ChunkID{ch.ID}, 0); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// rawCodec sends []byte messages as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// plainStreamMBs sends n bytes in 1 MiB messages over one client stream to
// a gRPC server in this process that discards them, with the nodes' buffer
// sizes, and returns MB/s.
func plainStreamMBs(b *testing.B, n int64) float64 {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sink := func(_ any, s grpc.ServerStream) error {
		var m []byte
		for {
			if err := s.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					return s.SendMsg(&m)
				}
				return err
			}
		}
	}
	gs := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.ReadBufferSize(256<<10), grpc.WriteBufferSize(1<<20),
		grpc.MaxRecvMsgSize(4<<20))
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: "bench.Sink", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Sink", Handler: sink, ClientStreams: true}}}, struct{}{})
	go gs.Serve(lis)
	defer gs.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})), grpc.WithReadBufferSize(256<<10), grpc.WithWriteBufferSize(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	msg := chunkOf(7, handoffChunkSize).Data
	start := time.Now()
	s, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true}, "/bench.Sink/Sink")
	if err != nil {
		b.Fatal(err)
	}
	for sent := int64(0); sent < n; sent += int64(len(msg)) {
		if err := s.SendMsg(&msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		b.Fatal(err)
	}
	var reply []byte
	if err := s.RecvMsg(&reply); err != nil {
		b.Fatal(fmt.Errorf("sink: %w", err))
	}
	return float64(n) / time.Since(start).Seconds() / 1e6
}

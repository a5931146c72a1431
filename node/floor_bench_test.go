package node

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvring/kvring/internal/testutil"
)

// BenchmarkLookupFloor puts a kvring Lookup beside the floor of its
// transport and beside Redis, in one run: a Lookup of 8 held ids through the
// SDK to one node in process; a bare gRPC unary call (the health service's
// Check on a server with nothing else, no kvring code on either side); and
// a redis-server EXISTS of 8 keys through go-redis. Each runs alone
// ("seq") and with 4 callers at once ("par4"), and reports its median and
// 99th percentile latency (p50-us, p99-us). The gRPC call's median against
// Redis's is what any lookup over gRPC pays at least; docs/benchmarks.md
// reads the goals of issue 17 against it.
//
// It needs redis-server on PATH (apt-get install redis-server) and fails
// without it.
//
//	go test -run '^$' -bench LookupFloor -benchtime 5000x ./node/
func BenchmarkLookupFloor(b *testing.B) {
	sdk := benchNode(b)
	ids := heldChunks(b, sdk, 8, 32<<10)
	rdb := benchRedis(b, 8, 32<<10)
	health := benchHealth(b)
	ctx := context.Background()
	calls := map[string]func() error{
		"kvring-lookup8": func() error {
			res, err := sdk.Lookup(ctx, ids, 0)
			if err == nil && res.Held != len(ids) {
				err = fmt.Errorf("lookup: %d of %d held", res.Held, len(ids))
			}
			return err
		},
		"grpc-unary": func() error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		},
		"redis-exists8": func() error {
			n, err := rdb.Exists(ctx, redisKeys(8)...).Result()
			if err == nil && n != 8 {
				err = fmt.Errorf("exists: %d of 8", n)
			}
			return err
		},
	}
	for _, callers := range []int{1, 4} {
		for _, name := range []string{"kvring-lookup8", "grpc-unary", "redis-exists8"} {
			mode := "seq"
			if callers > 1 {
				mode = "par" + strconv.Itoa(callers)
			}
			b.Run(name+"/"+mode, func(b *testing.B) { timeCalls(b, callers, calls[name]) })
		}
	}
}

// timeCalls runs call b.N times over callers goroutines and reports the
// median and 99th percentile of the calls' latencies.
func timeCalls(b *testing.B, callers int, call func() error) {
	lat := make([][]time.Duration, callers)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range callers {
		n := b.N / callers
		if w < b.N%callers {
			n++
		}
		wg.Go(func() {
			for range n {
				start := time.Now()
				if err := call(); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-us")
}

func redisKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "floor:" + strconv.Itoa(i)
	}
	return keys
}

// benchRedis starts a redis-server on a free loopback port (killed when the
// benchmark ends), sets n keys of size bytes, and returns a client of it.
func benchRedis(b *testing.B, n, size int) *redis.Client {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Fatalf("redis-server is not on PATH (apt-get install redis-server): %v", err)
	}
	hold, err := testutil.HoldPort("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hold.Close() })
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(hold.Port()),
		"--save", "", "--appendonly", "no", "--dir", b.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := testutil.Start(cmd); err != nil {
		b.Fatalf("cannot start redis-server: %v", err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.Eventually(b, "redis-server to listen", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", hold.Addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	rdb := redis.NewClient(&redis.Options{Addr: hold.Addr()})
	b.Cleanup(func() { rdb.Close() })
	for _, k := range redisKeys(n) {
		if err := rdb.Set(context.Background(), k, bytes.Repeat([]byte{7}, size), 0).Err(); err != nil {
			b.Fatalf("redis set: %v (%s)", err, out.String())
		}
	}
	return rdb
}

// benchHealth serves only gRPC's health service on a loopback port and
// returns a client of it over one connection.
func benchHealth(b *testing.B) healthpb.HealthClient {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

package disk

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

// BenchmarkGetVsFio: gets of disk-held chunks against fio's direct random
// reads of the same block size, in the same directory, at the same queue
// depth (KVRING_DISK_BENCH_QD), alternating in short rounds within one run
// so that both see the same load on a shared host. A get is store.Lend, as
// a node serves an engine: one pread of the record, the copy into shared
// memory that checks the checksum in the same pass, the View the reply is
// sent from. It reports the mean MB/s of the tier and fio and the median
// over the rounds of each round's tier/fio (fio running right after the
// gets), with the read-only Tier.Read as a second figure and a plain
// O_DIRECT pread loop over fio's own file as a third (pread/fio: what Go's
// system call path gets against fio's libaio, without the tier). Then
// get/pread_paired: gets and preads of the same size done in pairs, one
// right after the other on each goroutine, for a second a round; the
// ratio of their summed times is free of the host's drift between rounds,
// which moves the others by ±50 % on a shared host.
// Like with like: qd goroutines with one get each in flight against fio's
// iodepth qd; the same block size (a get also reads its record's header
// block, not counted in its MB/s); random chunks of a 512 MiB data set
// against random blocks of fio's 512 MiB file; each figure is payload bytes
// over the wall time of its own rounds.
// KVRING_DISK_BENCH_ROUNDS sets the rounds (default 6), each a second of
// each. Skipped without fio.
//
//	KVRING_DISK_BENCH_DIR=/var/tmp go test -run '^$' -bench GetVsFio -benchtime 1x ./store/disk
func BenchmarkGetVsFio(b *testing.B) {
	if _, err := exec.LookPath("fio"); err != nil {
		b.Skip("fio is not installed")
	}
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			dir := benchDir(b)
			logs := slog.New(slog.NewTextHandler(io.Discard, nil))
			tr, err := Open(Config{Dir: dir, Limit: 4 << 30, RegionSize: 64 << 20, QueueBytes: 64 << 20, Logger: logs})
			if err != nil {
				b.Fatal(err)
			}
			st, err := store.Open(store.Config{DataDir: b.TempDir(), ShmDir: testutil.ShmDir(b, "disk-bench-"),
				MemoryLimit: 8 << 20, MaintenanceInterval: -1, Lower: tr, Logger: logs})
			if err != nil {
				tr.Close()
				b.Fatal(err)
			}
			defer tr.Close()
			defer st.Close()
			ids := benchFill(b, st, tr, size)
			qd := benchQD()
			fio := fioArgs(dir, size, qd)
			fioRun(b, append(fio, "--runtime=1")) // lays its file out
			pr := newPreader(b, filepath.Join(dir, "randread.0.0"), size)
			var rs rounds
			for range benchRounds() {
				var r round
				r.get = readFor(b, qd, size, func(id store.ID) error { return lendOnce(st, id) }, ids)
				r.fio = fioRun(b, fio)
				r.read = readFor(b, qd, size, func(id store.ID) error { return readOnce(tr, id) }, ids)
				r.pread = readFor(b, qd, size, func(id store.ID) error { return pr.read(id) }, ids)
				r.pairs = readPairs(b, qd, func(id store.ID) error { return lendOnce(st, id) }, pr.read, ids)
				rs = append(rs, r)
			}
			rs.report(b)
		})
	}
}

// preader reads random size-aligned blocks of fio's file with O_DIRECT
// pread, one block per call into a buffer of its own per call, as fio's
// job does: the "pread" figure, Go's system call path without the tier.
type preader struct {
	fd   int
	size int
	n    int64
	pool sync.Pool
}

func newPreader(b *testing.B, path string, size int) *preader {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		b.Fatal(err)
	}
	p := &preader{fd: fd, size: size, n: st.Size / int64(size)}
	p.pool.New = func() any { b := alignedBuf(int64(size)); return &b }
	return p
}

// read reads the block the id's first bytes pick.
func (p *preader) read(id store.ID) error {
	buf := p.pool.Get().(*[]byte)
	defer p.pool.Put(buf)
	i := (int64(id[0]) | int64(id[1])<<8 | int64(id[3])<<16) % p.n
	return preadvFull(p.fd, [][]byte{*buf}, i*int64(p.size))
}

func benchRounds() int { return envInt("KVRING_DISK_BENCH_ROUNDS", 6) }

func lendOnce(st *store.Store, id store.ID) error {
	v, err := st.Lend("bench", id)
	if err == nil {
		v.Release()
	}
	return err
}

func readOnce(tr *Tier, id store.ID) error {
	c, err := tr.Read("bench", id, true)
	if err == nil {
		c.Release()
	}
	return err
}

// readFor reads random chunks from qd goroutines for a second and returns
// the MB/s.
func readFor(b *testing.B, qd, size int, read func(store.ID) error, ids []store.ID) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range qd {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
			for time.Since(start) < time.Second {
				if err := read(ids[r.IntN(len(ids))]); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) * float64(size) / time.Since(start).Seconds() / 1e6
}

// round is one round of BenchmarkGetVsFio: the MB/s of each reader, one
// after the other, and a second of gets paired with preads.
type round struct {
	get, fio, read, pread float64
	pairs                 pairTimes
}

type rounds []round

// report reports the mean MB/s of each reader, the medians of the rounds'
// ratios to fio (each round's fio ran right after its gets), and gets
// against preads paired op by op over all rounds.
func (rs rounds) report(b *testing.B) {
	var pairs pairTimes
	var get, fio, read []float64
	var getR, readR, preadR []float64
	for _, r := range rs {
		pairs.add(r.pairs)
		get, fio, read = append(get, r.get), append(fio, r.fio), append(read, r.read)
		getR, readR, preadR = append(getR, r.get/r.fio), append(readR, r.read/r.fio), append(preadR, r.pread/r.fio)
	}
	b.ReportMetric(mean(get), "get_MB/s")
	b.ReportMetric(mean(read), "read_MB/s")
	b.ReportMetric(mean(fio), "fio_MB/s")
	b.ReportMetric(median(getR), "get/fio")
	b.ReportMetric(median(readR), "read/fio")
	b.ReportMetric(median(preadR), "pread/fio")
	b.ReportMetric(pairs.b.Seconds()/pairs.a.Seconds(), "get/pread_paired")
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// pairTimes are the summed times of two reads done in pairs.
type pairTimes struct{ a, b time.Duration }

func (p *pairTimes) add(q pairTimes) { p.a += q.a; p.b += q.b }

// readPairs runs pairs of reads of random chunks for a second from qd
// goroutines, each pair a then b, one after the other on one goroutine,
// and returns the time each took in all: their ratio is free of the
// host's drift between rounds, since every a has a b next to it.
func readPairs(b *testing.B, qd int, a, c func(store.ID) error, ids []store.ID) pairTimes {
	var mu sync.Mutex
	var sum pairTimes
	var wg sync.WaitGroup
	start := time.Now()
	for g := range qd {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
			var my pairTimes
			for time.Since(start) < time.Second {
				t0 := time.Now()
				if err := a(ids[r.IntN(len(ids))]); err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				if err := c(ids[r.IntN(len(ids))]); err != nil {
					b.Error(err)
					return
				}
				my.a += t1.Sub(t0)
				my.b += time.Since(t1)
			}
			mu.Lock()
			sum.add(my)
			mu.Unlock()
		})
	}
	wg.Wait()
	return sum
}

// fioArgs are fio's direct random reads of size bytes at qd in dir.
func fioArgs(dir string, size, qd int) []string {
	return []string{"--name=randread", "--directory=" + dir, "--direct=1", "--size=512M", "--rw=randread",
		fmt.Sprintf("--bs=%d", size), "--ioengine=libaio", fmt.Sprintf("--iodepth=%d", qd),
		"--time_based", "--runtime=1", "--output-format=json"}
}

// fioRun runs fio and returns its MB/s.
func fioRun(b *testing.B, args []string) float64 {
	out, err := exec.Command("fio", slices.Clone(args)...).Output()
	if err != nil {
		b.Fatalf("fio: %v", err)
	}
	var res struct {
		Jobs []struct {
			Read struct {
				BW float64 `json:"bw_bytes"`
			} `json:"read"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		b.Fatalf("fio's output: %v", err)
	}
	return res.Jobs[0].Read.BW / 1e6
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

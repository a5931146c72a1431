package disk

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

const mib = 1 << 20

func testConfig(t testing.TB, dir string) Config {
	logs := &testutil.Logs{}
	return Config{Dir: dir, Limit: 8 * mib, RegionSize: mib, Logger: logs.Logger()}
}

func openTier(t testing.TB, cfg Config) *Tier {
	t.Helper()
	tr, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func chunkID(i int) store.ID { return sha256.Sum256(fmt.Appendf(nil, "chunk-%d", i)) }

func chunkBytes(i, size int) []byte {
	b := make([]byte, size)
	var seed [32]byte
	seed[0], seed[1] = byte(i), byte(i>>8)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

// offload offers chunk i of size bytes and reports whether the tier took it.
func offload(tr *Tier, ns string, i, size int) bool {
	b := chunkBytes(i, size)
	return tr.Offload(ns, chunkID(i), crc32c.Checksum(b), size, []byte("m"), func(dst []byte) error {
		copy(dst, b)
		return nil
	})
}

// drain waits until the writer has taken every queued record.
func drain(t testing.TB, tr *Tier) {
	testutil.Eventually(t, "write queue drained", 10*time.Second, func() bool {
		s := tr.Stats()
		return s.QueuedChunks == 0
	})
}

func readBack(t testing.TB, tr *Tier, ns string, i, size int) error {
	t.Helper()
	c, err := tr.Read(ns, chunkID(i), true)
	if err != nil {
		return err
	}
	defer c.Release()
	if !bytes.Equal(c.Bytes, chunkBytes(i, size)) {
		t.Fatalf("chunk %d: wrong bytes", i)
	}
	if string(c.Meta) != "m" {
		t.Fatalf("chunk %d: meta %q", i, c.Meta)
	}
	return nil
}

func TestOffloadedChunksReadBackByteExactFromQueueAndDisk(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	for i := range 6 {
		if !offload(tr, "ns", i, 100_000+i) {
			t.Fatalf("offload %d dropped", i)
		}
		if !tr.Contains("ns", chunkID(i)) {
			t.Fatalf("chunk %d not held right after its offload", i)
		}
	}
	drain(t, tr)
	for i := range 6 {
		if err := readBack(t, tr, "ns", i, 100_000+i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Read("ns", chunkID(99), true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown chunk: %v", err)
	}
	if !offload(tr, "ns", 0, 100_000) || tr.Stats().AlreadyHeld != 1 {
		t.Fatalf("second offload of a held chunk: %+v", tr.Stats())
	}
	if !tr.Remove("ns", chunkID(1)) || tr.Contains("ns", chunkID(1)) {
		t.Fatal("Remove left the chunk held")
	}
	if n, _ := tr.DropNamespace("ns"); n != 5 {
		t.Fatalf("DropNamespace dropped %d, want 5", n)
	}
}

func TestRegionsAreEvictedOldestFirstWithinTheLimit(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	const size = 200_000 // 4 per 1 MiB region
	for i := range 60 {
		offload(tr, "ns", i, size)
		drain(t, tr)
	}
	s := tr.Stats()
	if s.UsedBytes > 8*mib || s.RegionsEvicted == 0 {
		t.Fatalf("used %d of 8 MiB, %d regions evicted", s.UsedBytes, s.RegionsEvicted)
	}
	if tr.Contains("ns", chunkID(0)) || !tr.Contains("ns", chunkID(59)) {
		t.Fatal("nothing used since: the oldest chunk should be gone and the newest held")
	}
	files, _ := filepath.Glob(filepath.Join(tr.cfg.Dir, "region-*.kvr"))
	if int64(len(files))*mib > 8*mib {
		t.Fatalf("%d region files on disk for an 8 MiB limit", len(files))
	}
	for i := range 60 {
		if tr.Contains("ns", chunkID(i)) {
			if err := readBack(t, tr, "ns", i, size); err != nil {
				t.Fatalf("held chunk %d: %v", i, err)
			}
		}
	}
}

func TestAPinnedRegionIsNotEvicted(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := testConfig(t, t.TempDir())
	cfg.Now = func() time.Time { return now }
	tr := openTier(t, cfg)
	offload(tr, "ns", 0, 200_000)
	drain(t, tr)
	if !tr.Pin("ns", chunkID(0), now.Add(time.Minute).UnixNano()) {
		t.Fatal("Pin of a held chunk said not held")
	}
	for i := 1; i < 60; i++ {
		offload(tr, "ns", i, 200_000)
		drain(t, tr)
	}
	if !tr.Contains("ns", chunkID(0)) {
		t.Fatal("a pinned chunk's region was evicted")
	}
}

func TestClosedTierIsFoundAgainFromFooters(t *testing.T) {
	dir := t.TempDir()
	tr, err := Open(testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		offload(tr, "ns", i, 150_000)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr = openTier(t, testConfig(t, dir))
	for i := range 10 {
		if err := readBack(t, tr, "ns", i, 150_000); err != nil {
			t.Fatalf("after a clean stop: %v", err)
		}
	}
	var n int
	tr.Held(func(ns string, id store.ID, size int64, meta []byte) { n++ })
	if n != 10 {
		t.Fatalf("Held listed %d chunks, want 10", n)
	}
}

// crash stops the writer as a SIGKILL would once the queue is written:
// no footer for the active region, the lock released with the process.
func crash(t testing.TB, tr *Tier) {
	drain(t, tr)
	tr.mu.Lock()
	tr.closed = true
	for _, r := range tr.regions {
		r.active = false // the writer seals nothing on its way out
	}
	tr.mu.Unlock()
	close(tr.stop)
	<-tr.done
	close(tr.syncq)
	<-tr.syncDone
	for _, r := range tr.regions {
		unix.Close(r.fd)
	}
	tr.lock.Close()
}

func TestKilledTierIsFoundAgainByScanning(t *testing.T) {
	dir := t.TempDir()
	tr, err := Open(testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // 3 regions: 2 sealed, 1 active
		offload(tr, "ns", i, 300_000)
	}
	crash(t, tr)
	tr = openTier(t, testConfig(t, dir))
	for i := range 10 {
		if err := readBack(t, tr, "ns", i, 300_000); err != nil {
			t.Fatalf("after a kill: %v", err)
		}
	}
	// New offloads go to a new region; the scanned one is not appended to.
	offload(tr, "ns", 10, 300_000)
	drain(t, tr)
	if err := readBack(t, tr, "ns", 10, 300_000); err != nil {
		t.Fatal(err)
	}
}

func TestACorruptedRecordIsAMissNeverWrongBytes(t *testing.T) {
	dir := t.TempDir()
	tr := openTier(t, testConfig(t, dir))
	for i := range 3 {
		offload(tr, "ns", i, 100_000)
	}
	drain(t, tr)
	// Flip a payload byte of chunk 1 under the running tier.
	flipPayloadByte(t, tr, "ns", 1)
	if _, err := tr.Read("ns", chunkID(1), true); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("corrupted chunk: %v, want ErrChecksum", err)
	}
	if tr.Contains("ns", chunkID(1)) || tr.Stats().ChecksumErrors != 1 {
		t.Fatalf("corrupted chunk still held, or not counted: %+v", tr.Stats())
	}
	for _, i := range []int{0, 2} {
		if err := readBack(t, tr, "ns", i, 100_000); err != nil {
			t.Fatal(err)
		}
	}
}

func TestATruncatedRegionDropsWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	tr := openTier(t, testConfig(t, dir))
	for i := range 4 {
		offload(tr, "ns", i, 200_000)
	}
	drain(t, tr)
	tr.mu.Lock()
	path := tr.regions[tr.idx[key("ns", chunkID(0))].region].path
	tr.mu.Unlock()
	if err := os.Truncate(path, 300_000); err != nil {
		t.Fatal(err)
	}
	if err := readBack(t, tr, "ns", 0, 200_000); err != nil {
		t.Fatalf("the record before the cut: %v", err)
	}
	for i := 1; i < 4; i++ {
		if _, err := tr.Read("ns", chunkID(i), true); !errors.Is(err, store.ErrChecksum) {
			t.Fatalf("chunk %d past the cut: %v", i, err)
		}
	}
	if s := tr.Stats(); s.ReadErrors != 3 || s.Chunks != 1 {
		t.Fatalf("stats after the cut: %+v", s)
	}
	// And a restart scans up to the cut.
	crash(t, tr)
	tr = openTier(t, testConfig(t, dir))
	if s := tr.Stats(); s.Chunks != 1 {
		t.Fatalf("after restart %d chunks, want 1", s.Chunks)
	}
}

func TestAnIOErrorDegradesTheTierAndDropsOffloadsUntilTheRetry(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	cfg := testConfig(t, t.TempDir())
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := openTier(t, cfg)
	offload(tr, "ns", 0, 100_000)
	drain(t, tr)
	fail := errors.New("injected EIO")
	var failing sync.Mutex
	broken := true
	tr.faults.write = func(string) error {
		failing.Lock()
		defer failing.Unlock()
		if broken {
			return fail
		}
		return nil
	}
	offload(tr, "ns", 1, 100_000)
	drain(t, tr)
	if err := tr.Health(); !errors.Is(err, ErrDegraded) || !errors.Is(err, fail) {
		t.Fatalf("Health after a failed write: %v", err)
	}
	if offload(tr, "ns", 2, 100_000) {
		t.Fatal("a degraded tier took an offload")
	}
	s := tr.Stats()
	if s.Drops[DropIOError] != 1 || s.Drops[DropDegraded] != 1 || tr.Contains("ns", chunkID(1)) {
		t.Fatalf("drops %v", s.Drops)
	}
	if err := readBack(t, tr, "ns", 0, 100_000); err != nil {
		t.Fatalf("a degraded tier still serves what it holds: %v", err)
	}
	failing.Lock()
	broken = false
	failing.Unlock()
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if !offload(tr, "ns", 3, 100_000) {
		t.Fatal("offload after RetryAfter dropped")
	}
	drain(t, tr)
	if err := tr.Health(); err != nil {
		t.Fatalf("Health after a write succeeded again: %v", err)
	}
	if err := readBack(t, tr, "ns", 3, 100_000); err != nil {
		t.Fatal(err)
	}
}

// TestAFullDiskDegradesTheTier: a filesystem that something else filled
// leaves the tier no room for its first region: it degrades (ENOSPC in
// Health), drops offloads and counts them; once the space is back and
// RetryAfter has passed it offloads again.
func TestAFullDiskDegradesTheTier(t *testing.T) {
	dir := testutil.MountTmpfs(t, "3m")
	now := time.Unix(1_000_000, 0)
	var mu sync.Mutex
	cfg := testConfig(t, dir)
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := openTier(t, cfg)
	ballast := filepath.Join(dir, "ballast")
	testutil.FillFile(t, ballast, math.MaxInt64)
	for i := range 5 {
		offload(tr, "ns", i, 200_000)
		drain(t, tr)
	}
	if err := tr.Health(); !errors.Is(err, ErrDegraded) || !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Health on a full disk: %v", err)
	}
	if s := tr.Stats(); s.Drops[DropDegraded]+s.Drops[DropIOError] == 0 || s.Chunks != 0 {
		t.Fatalf("stats on a full disk: %+v", s)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(DefaultRetryAfter + time.Second)
	mu.Unlock()
	if !offload(tr, "ns", 100, 200_000) {
		t.Fatal("no offload after the retry")
	}
	drain(t, tr)
	if err := tr.Health(); err != nil || readBack(t, tr, "ns", 100, 200_000) != nil {
		t.Fatalf("after the space came back: %v", err)
	}
}

// TestAFilesystemSmallerThanTheLimitKeepsTheTierGoing: on a 3 MiB
// filesystem under a larger limit the tier gives up its oldest region
// when it has no room for a new one, and keeps offloading
// within the space it has: never degraded, the latest chunks held.
func TestAFilesystemSmallerThanTheLimitKeepsTheTierGoing(t *testing.T) {
	dir := testutil.MountTmpfs(t, "3m")
	tr := openTier(t, testConfig(t, dir))
	for i := range 30 {
		offload(tr, "ns", i, 200_000)
		drain(t, tr)
	}
	if err := tr.Health(); err != nil {
		t.Fatalf("Health: %v", err)
	}
	s := tr.Stats()
	if s.RegionsGivenUp == 0 || s.Drops[DropIOError]+s.Drops[DropDegraded] != 0 {
		t.Fatalf("stats: %+v", s)
	}
	for i := 27; i < 30; i++ {
		if err := readBack(t, tr, "ns", i, 200_000); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
}

func TestADeletedDirectoryDegradesTheTierAndReadsGoOn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "disk")
	tr := openTier(t, testConfig(t, dir))
	for i := range 3 {
		offload(tr, "ns", i, 100_000)
	}
	drain(t, tr)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := tr.Health(); !errors.Is(err, ErrDegraded) {
		t.Fatalf("Health with the directory gone: %v", err)
	}
	if offload(tr, "ns", 5, 100_000) {
		t.Fatal("offload into a deleted directory taken")
	}
	for i := range 3 { // the open files still hold the bytes
		if err := readBack(t, tr, "ns", i, 100_000); err != nil {
			t.Fatal(err)
		}
	}
}

func TestASlowDiskDropsOffloadsInsteadOfBlocking(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.QueueBytes = 512 << 10
	tr := openTier(t, cfg)
	release := make(chan struct{})
	tr.faults.write = func(string) error { <-release; return nil }
	var took, dropped int
	for i := range 20 {
		if offload(tr, "ns", i, 100_000) {
			took++
		} else {
			dropped++
		}
	}
	close(release)
	if dropped == 0 || tr.Stats().Drops[DropQueueFull] != uint64(dropped) {
		t.Fatalf("took %d, dropped %d, stats %v", took, dropped, tr.Stats().Drops)
	}
	drain(t, tr)
	for i := range 20 {
		if tr.Contains("ns", chunkID(i)) {
			if err := readBack(t, tr, "ns", i, 100_000); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestAnUnreadableChunkIsNotOffloaded(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	if tr.Offload("ns", chunkID(1), 0, 1000, nil, func([]byte) error { return errors.New("fault") }) {
		t.Fatal("offload with a failing fill taken")
	}
	if tr.Contains("ns", chunkID(1)) || tr.Stats().Drops[DropUnreadable] != 1 {
		t.Fatal("unreadable offload held or not counted")
	}
}

// A region goes whole, oldest first; the chunks of it read or looked up
// since they were written are written again first (a second chance), the
// others go with it.
func TestAChunkReadSinceItsWriteIsWrittenAgainWhenItsRegionGoes(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir())) // 8 regions of 1 MiB, 4 chunks each
	for i := range 8 {
		offload(tr, "ns", i, 200_000)
	}
	tr.Flush()
	for _, i := range []int{0, 5} { // a read of one chunk in each of the two oldest regions
		if err := readBack(t, tr, "ns", i, 200_000); err != nil {
			t.Fatal(err)
		}
	}
	if !tr.Contains("ns", chunkID(1)) { // a membership test is not a use
		t.Fatal("chunk 1 not held")
	}
	if !tr.Pin("ns", chunkID(2), 0) { // a lookup (with no lease) is
		t.Fatal("chunk 2 not held")
	}
	i := 8
	for ; tr.Stats().RegionsEvicted < 2; i++ {
		offload(tr, "ns", i, 200_000)
		tr.Flush()
	}
	if s := tr.Stats(); s.Reinserted != 3 {
		t.Fatalf("the two oldest regions went: reinserted %d, want 3 (%+v)", s.Reinserted, s)
	}
	for _, i := range []int{1, 3, 4, 6, 7} {
		if tr.Contains("ns", chunkID(i)) {
			t.Fatalf("chunk %d, never read, outlived its region", i)
		}
	}
	for _, i := range []int{0, 2, 5} {
		if err := readBack(t, tr, "ns", i, 200_000); err != nil {
			t.Fatalf("chunk %d, read before its region went: %v", i, err)
		}
	}
	// Read again above: one more turn of the regions keeps them; then
	// one without a read lets them go.
	for end := i + 40; i < end; i++ {
		offload(tr, "ns", i, 200_000)
		tr.Flush()
	}
	if !tr.Contains("ns", chunkID(0)) || tr.Stats().Reinserted < 4 {
		t.Fatalf("chunk 0, read in its second region, went with it: %+v", tr.Stats())
	}
	for end := i + 40; i < end; i++ {
		offload(tr, "ns", i, 200_000)
		tr.Flush()
	}
	if tr.Contains("ns", chunkID(0)) {
		t.Fatal("chunk 0, not read since its last write, outlived its region")
	}
}

// A chunk removed after its region's eviction queued it again stays removed.
func TestARemovedChunkIsNotReinserted(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	for i := range 4 {
		offload(tr, "ns", i, 200_000)
	}
	tr.Flush()
	if err := readBack(t, tr, "ns", 0, 200_000); err != nil {
		t.Fatal(err)
	}
	if !tr.Remove("ns", chunkID(0)) {
		t.Fatal("Remove: not held")
	}
	for i := 4; tr.Stats().RegionsEvicted < 1; i++ {
		offload(tr, "ns", i, 200_000)
		tr.Flush()
	}
	if s := tr.Stats(); tr.Contains("ns", chunkID(0)) || s.Reinserted != 0 {
		t.Fatalf("a removed chunk came back with its region's eviction: %+v", s)
	}
}

// A chunk read since its write whose record went bad on disk is dropped and
// counted when its region goes, not written again.
func TestACorruptedChunkIsNotReinserted(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	for i := range 4 {
		offload(tr, "ns", i, 200_000)
	}
	tr.Flush()
	for i := range 2 {
		if err := readBack(t, tr, "ns", i, 200_000); err != nil {
			t.Fatal(err)
		}
	}
	flipPayloadByte(t, tr, "ns", 1)
	for i := 4; tr.Stats().RegionsEvicted < 1; i++ {
		offload(tr, "ns", i, 200_000)
		tr.Flush()
	}
	if s := tr.Stats(); s.Reinserted != 1 || s.ChecksumErrors != 1 || tr.Contains("ns", chunkID(1)) {
		t.Fatalf("the corrupted chunk: reinserted %d (want 1, the other), checksum errors %d, held %v",
			s.Reinserted, s.ChecksumErrors, tr.Contains("ns", chunkID(1)))
	}
	if err := readBack(t, tr, "ns", 0, 200_000); err != nil {
		t.Fatal(err)
	}
}

package store

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// fakeClock is a Config.Now that moves only when the test says so.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// syncBuffer is a log sink safe for a logger used from many goroutines.
type syncBuffer = testutil.Logs

// clockConfig is testConfig with a fake clock.
func clockConfig(t testing.TB, limit int64) (Config, *fakeClock) {
	t.Helper()
	cfg := testConfig(t, limit)
	clk := newFakeClock()
	cfg.Now = clk.Now
	return cfg, clk
}

// wantErr fails unless err wraps sentinel and its message contains every
// fragment.
func wantErr(t testing.TB, err, sentinel error, fragments ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("got error %v, want %v", err, sentinel)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
}

// readBack fails unless the chunk is readable and byte-exact.
func readBack(t testing.TB, s *Store, ns string, id ID, want []byte) {
	t.Helper()
	v, err := s.Get(ns, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	defer v.Release()
	if !bytes.Equal(v.Bytes(), want) {
		t.Fatalf("Get %s: bytes differ from what was written", id)
	}
}

// stageWrite stages chunk c and writes its first n bytes in frames of the
// given size.
func stageWrite(t testing.TB, s *Store, ns string, c *chunkSpec, n, frame int) *Staged {
	t.Helper()
	w, err := s.Stage(ns, c.id, int64(c.size), Checksum(c.data))
	if err != nil {
		t.Fatalf("Stage %s: %v", c, err)
	}
	for off := 0; off < n; off += frame {
		if _, err := w.Write(c.data[off:min(off+frame, n)]); err != nil {
			t.Fatalf("Write %s: %v", c, err)
		}
	}
	return w
}

// entryOf returns the index entry of a chunk (staged or sealed), or nil.
func entryOf(s *Store, ns string, id ID) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, known, err := s.key(ns, id, false)
	if err != nil || !known {
		return nil
	}
	return s.idx.get(k, k.hash())
}

// evictedWhilePinned reports whether the policy evicted the chunk while a
// lease pinned it (it stays readable until the pins end).
func evictedWhilePinned(s *Store, ns string, id ID) bool {
	e := entryOf(s, ns, id)
	if e == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.state == stateSealed && e.evicted
}

// chunkSpec is one chunk of a test universe: its id, size and bytes.
type chunkSpec struct {
	id   ID
	size int
	data []byte
}

func newSpec(n uint64, size int) *chunkSpec {
	id := testID(n)
	return &chunkSpec{id: id, size: size, data: payload(id, size)}
}

// span is a slot range some live chunk, staged write or open view occupies.
type span struct {
	seg       uint32
	off, size int64
	what      string
}

// checkNoOverlap fails if two spans of one segment overlap.
func checkNoOverlap(t testing.TB, spans []span) {
	t.Helper()
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].seg != spans[j].seg {
			return spans[i].seg < spans[j].seg
		}
		return spans[i].off < spans[j].off
	})
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		if a.seg == b.seg && a.off+a.size > b.off {
			t.Fatalf("%s [%d,+%d) and %s [%d,+%d) overlap in segment %d", a.what, a.off, a.size, b.what, b.off, b.size, a.seg)
		}
	}
}

func entrySpan(e *entry, what string) span {
	return span{seg: e.slot.seg.id, off: int64(e.slot.slot) * e.slot.seg.slotSize, size: int64(e.size), what: what}
}

// settle waits until the admission policy has decided about every write
// queued so far and run its callbacks, so that no eviction is in flight.
func settle(s *Store) { s.pol.wait() }

// quiescentCheck verifies, with no operation in flight and no staged write,
// View or lease outstanding, that the store holds exactly what it says: every
// chunk Contains reports is readable byte-exact, no two overlap, and Stats
// equals the sum over them. It returns the held chunks.
func quiescentCheck(t testing.TB, s *Store, ns string, universe []*chunkSpec) map[ID]*chunkSpec {
	t.Helper()
	settle(s)
	held := make(map[ID]*chunkSpec)
	var spans []span
	var payload, slots int64
	for _, c := range universe {
		if !s.Contains(ns, c.id) {
			continue
		}
		v, err := s.Get(ns, c.id)
		if err != nil {
			t.Fatalf("Contains %s but Get: %v", c.id, err)
		}
		if !bytes.Equal(v.Bytes(), c.data) {
			t.Fatalf("chunk %s reads back different bytes", c.id)
		}
		loc := v.Location()
		spans = append(spans, span{seg: loc.Segment, off: loc.Offset, size: loc.Size, what: c.id.String()[:8]})
		v.Release()
		held[c.id] = c
		payload += int64(c.size)
		slots += classSize(int64(c.size))
	}
	checkNoOverlap(t, spans)
	st := s.Stats()
	if st.Chunks != int64(len(held)) || st.PayloadBytes != payload {
		t.Fatalf("Stats says %d chunks / %d bytes, %d chunks / %d bytes are held", st.Chunks, st.PayloadBytes, len(held), payload)
	}
	if st.StagedChunks != 0 || st.StagedBytes != 0 || st.PinnedChunks != 0 {
		t.Fatalf("Stats has %d staged chunks (%d bytes), %d pinned; want none", st.StagedChunks, st.StagedBytes, st.PinnedChunks)
	}
	if st.UsedBytes != slots {
		t.Fatalf("UsedBytes = %d, held chunks' slots sum to %d", st.UsedBytes, slots)
	}
	if st.UsedBytes+st.RetainedFreeBytes > st.LimitBytes {
		t.Fatalf("UsedBytes %d + RetainedFreeBytes %d exceed the limit %d", st.UsedBytes, st.RetainedFreeBytes, st.LimitBytes)
	}
	return held
}

// stillWorks checks that the store accepts and serves a fresh chunk after a
// failed call, and that its accounting is consistent.
func stillWorks(t testing.TB, s *Store, universe ...*chunkSpec) {
	t.Helper()
	probe := newSpec(1<<40+uint64(s.Stats().Seals), 5000)
	mustPut(t, s, "probe", probe.id, probe.data)
	readBack(t, s, "probe", probe.id, probe.data)
	if err := s.evict("probe", probe.id); err != nil {
		t.Fatalf("Evict probe: %v", err)
	}
	quiescentCheck(t, s, "ns", universe)
}

func (c *chunkSpec) String() string { return fmt.Sprintf("%s(%d)", c.id.String()[:8], c.size) }

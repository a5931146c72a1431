package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The property test drives a small store with random operations and checks,
// after each, that it agrees with a naive model. The policy may evict any
// sealed, unpinned chunk when a new one is staged, so the model tracks what
// may be held; a chunk may vanish, but never while pinned, and never comes
// back without a new seal.

const (
	propSeeds      = 50
	propOps        = 300
	propUniverse   = 30
	propLimit      = 256 << 10
	propStageLease = 10 * time.Second
	propPinLease   = 30 * time.Second
	propNS         = "prop"
)

// propSizes span several size classes, exact and rounded.
var propSizes = []int{1 << 10, 3<<10 + 5, 4 << 10, 8 << 10, 13<<10 + 1, 16 << 10, 32 << 10, 33 << 10, 64 << 10}

type propStaged struct {
	w        *Staged
	c        *chunkSpec
	written  int // Write mode: bytes written
	direct   bool
	filled   bool // direct mode: Bytes was filled (whole chunk or half)
	full     bool // direct mode: the whole chunk was filled
	badCRC   bool
	deadline time.Time
	expired  bool // ExpireNow freed it
}

type propLease struct {
	pin    PinID
	ids    []ID
	expiry time.Time
}

type propView struct {
	v *View
	c *chunkSpec
}

type propModel struct {
	t        *testing.T
	rng      *rand.Rand
	cfg      Config
	clk      *fakeClock
	s        *Store
	universe []*chunkSpec
	byID     map[ID]*chunkSpec
	mayHold  map[ID]bool // sealed and not seen gone since
	staged   []*propStaged
	leases   []*propLease
	views    []*propView
	trace    []string
}

func TestRandomOperationsAgreeWithModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(propSeeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			m := newPropModel(t, seed)
			defer func() {
				if t.Failed() {
					t.Logf("last operations:\n%s", m.lastOps(25))
				}
			}()
			for range propOps {
				m.step()
				if t.Failed() {
					return
				}
				m.check()
				if t.Failed() {
					return
				}
			}
			m.drain()
		})
	}
}

func newPropModel(t *testing.T, seed uint64) *propModel {
	cfg, clk := clockConfig(t, propLimit)
	cfg.MaxPinnedBytes = propLimit // the model knows no pin limit
	// Both policies: the invariants must hold whichever decides what stays.
	cfg.Policy = []string{PolicyLRU, PolicyTinyLFU}[seed%2]
	cfg.SegmentSize = 64 << 10
	cfg.StageLease = propStageLease
	cfg.MaxPinLease = propPinLease
	m := &propModel{
		t:       t,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		cfg:     cfg,
		clk:     clk,
		byID:    make(map[ID]*chunkSpec),
		mayHold: make(map[ID]bool),
	}
	for i := range propUniverse {
		c := newSpec(seed<<32|uint64(i), propSizes[m.rng.IntN(len(propSizes))])
		m.universe = append(m.universe, c)
		m.byID[c.id] = c
	}
	m.open()
	return m
}

func (m *propModel) open() {
	s, err := Open(m.cfg)
	if err != nil {
		m.t.Fatalf("Open: %v", err)
	}
	m.s = s
	m.t.Cleanup(func() { s.Close() })
}

func (m *propModel) logf(format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf(format, args...))
}

func (m *propModel) lastOps(n int) string {
	var b bytes.Buffer
	for _, l := range m.trace[max(0, len(m.trace)-n):] {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func (m *propModel) pick() *chunkSpec { return m.universe[m.rng.IntN(len(m.universe))] }

func (m *propModel) pinned(id ID) bool {
	for _, l := range m.leases {
		for _, x := range l.ids {
			if x == id {
				return true
			}
		}
	}
	return false
}

// pickForSeal mostly picks a staged write whose bytes are all there, so that
// seals mostly succeed.
func (m *propModel) pickForSeal() *propStaged {
	if m.rng.IntN(4) != 0 {
		for _, i := range m.rng.Perm(len(m.staged)) {
			if p := m.staged[i]; p.written == p.c.size || p.filled {
				return p
			}
		}
	}
	return m.staged[m.rng.IntN(len(m.staged))]
}

func (m *propModel) dropStaged(p *propStaged) {
	for i, q := range m.staged {
		if q == p {
			m.staged = append(m.staged[:i], m.staged[i+1:]...)
			return
		}
	}
}

// step runs one random operation and checks its immediate result.
func (m *propModel) step() {
	t := m.t
	settle(m.s)
	switch r := m.rng.IntN(100); {
	case r < 22:
		m.stage()
	case r < 38:
		if len(m.staged) > 0 {
			m.write(m.staged[m.rng.IntN(len(m.staged))])
		}
	case r < 54:
		if len(m.staged) > 0 {
			m.seal(m.pickForSeal())
		}
	case r < 56:
		if len(m.staged) > 0 {
			p := m.staged[m.rng.IntN(len(m.staged))]
			m.logf("abort %v", p.c)
			p.w.Abort()
			m.dropStaged(p)
			if m.s.Contains(propNS, p.c.id) {
				t.Fatalf("aborted chunk %v is held", p.c)
			}
		}
	case r < 66:
		m.get()
	case r < 70:
		if len(m.views) > 0 {
			i := m.rng.IntN(len(m.views))
			m.logf("release view %v", m.views[i].c)
			m.views[i].v.Release()
			m.views = append(m.views[:i], m.views[i+1:]...)
		}
	case r < 78:
		m.lookup()
	case r < 83:
		m.release()
	case r < 88:
		m.evict()
	case r < 98:
		m.expire()
	default:
		m.restart()
	}
}

func (m *propModel) stage() {
	t, c := m.t, m.pick()
	held := m.s.Contains(propNS, c.id)
	busy := false
	for _, p := range m.staged {
		busy = busy || (p.c.id == c.id && !p.expired)
	}
	p := &propStaged{c: c, direct: m.rng.IntN(3) == 0, badCRC: m.rng.IntN(10) == 0}
	crc := Checksum(c.data)
	if p.badCRC {
		crc ^= 1
	}
	used := m.s.Stats().UsedBytes
	w, err := m.s.Stage(propNS, c.id, int64(c.size), crc)
	m.logf("stage %v direct=%v badCRC=%v: %v", c, p.direct, p.badCRC, err)
	switch {
	case held:
		if !errors.Is(err, ErrAlreadyHeld) {
			t.Fatalf("Stage of held %v: %v, want ErrAlreadyHeld", c, err)
		}
	case busy:
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("Stage of staged %v: %v, want ErrBusy", c, err)
		}
	case err == nil:
		p.w = w
		p.deadline = m.clk.Now().Add(propStageLease)
		m.staged = append(m.staged, p)
		if m.rng.IntN(2) == 0 {
			// Write it all and seal at once, so the store fills up.
			for !p.filled && p.written < c.size && !t.Failed() {
				m.write(p)
			}
			m.seal(p)
		}
	case errors.Is(err, ErrNoSpace):
		// Only when the budget truly has no room for the slot.
		if st := m.s.Stats(); st.UsedBytes+classSize(int64(c.size)) <= st.LimitBytes {
			t.Fatalf("Stage of %v: ErrNoSpace with %d of %d bytes used (was %d)", c, st.UsedBytes, st.LimitBytes, used)
		}
	case errors.Is(err, ErrRejected):
	default:
		t.Fatalf("Stage of %v: %v", c, err)
	}
	if err != nil && !held && m.s.Contains(propNS, c.id) {
		t.Fatalf("refused chunk %v is held", c)
	}
}

func (m *propModel) write(p *propStaged) {
	t := m.t
	if p.direct {
		if p.expired || p.filled {
			return // a freed slot must not be written through a stale Bytes
		}
		buf := p.w.Bytes()
		n := len(buf)
		if m.rng.IntN(8) == 0 {
			n /= 2 // leave the rest as the slot's previous bytes
		}
		copy(buf[:n], p.c.data[:n])
		p.filled, p.full = true, n == len(buf)
		m.logf("fill %v %d bytes", p.c, n)
		return
	}
	rest := p.c.size - p.written
	n := rest
	if m.rng.IntN(2) == 0 {
		n = 1 + m.rng.IntN(max(1, rest)) // frames of any length
	}
	over := rest == 0 || m.rng.IntN(15) == 0
	var frame []byte
	if over {
		frame = make([]byte, rest+1)
	} else {
		frame = p.c.data[p.written : p.written+n]
	}
	_, err := p.w.Write(frame)
	m.logf("write %v [%d,+%d) over=%v: %v", p.c, p.written, len(frame), over, err)
	switch {
	case over:
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Write past the size: %v, want ErrInvalid", err)
		}
	case p.expired:
		if !errors.Is(err, ErrLeaseExpired) {
			t.Fatalf("Write after the lease expired: %v, want ErrLeaseExpired", err)
		}
	case err != nil:
		t.Fatalf("Write: %v", err)
	default:
		p.written += n
	}
}

func (m *propModel) seal(p *propStaged) {
	t := m.t
	// The policy's decision about this write is in (step waited for it):
	// declined or evicted while staged means the seal must be refused.
	var refused bool
	settle(m.s)
	if !p.expired {
		m.s.mu.Lock()
		refused = p.w.e.evicted || p.w.e.rejected
		m.s.mu.Unlock()
	}
	heldBefore := m.s.Contains(propNS, p.c.id) // by another write of the same chunk
	err := p.w.Seal()
	m.logf("seal %v written=%d filled=%v refused=%v: %v", p.c, p.written, p.filled, refused, err)
	m.dropStaged(p)
	// A refused write may report its own defect or the refusal.
	okRefused := refused && errors.Is(err, ErrRejected)
	switch {
	case p.expired:
		if !errors.Is(err, ErrLeaseExpired) {
			t.Fatalf("Seal after the lease expired: %v, want ErrLeaseExpired", err)
		}
	case !p.filled && p.written < p.c.size:
		if !errors.Is(err, ErrIncomplete) && !okRefused {
			t.Fatalf("Seal of %d of %d bytes: %v, want ErrIncomplete", p.written, p.c.size, err)
		}
	case p.badCRC:
		if !errors.Is(err, ErrChecksum) && !okRefused {
			t.Fatalf("Seal with the wrong checksum: %v, want ErrChecksum", err)
		}
	case p.direct && !p.full:
		// Bytes left unwritten hold whatever the slot held before: only if
		// that happens to be this very chunk (a reused slot) may it seal.
		if err != nil && !errors.Is(err, ErrChecksum) && !okRefused {
			t.Fatalf("Seal of a partly filled slot: %v, want nil or ErrChecksum", err)
		}
		if err == nil && refused {
			t.Fatal("a write the policy refused was sealed")
		}
	case refused:
		if !errors.Is(err, ErrRejected) {
			t.Fatalf("Seal of a write the policy refused: %v, want ErrRejected", err)
		}
	case err != nil:
		t.Fatalf("Seal of %v: %v", p.c, err)
	}
	if err == nil {
		m.mayHold[p.c.id] = true
		if !m.s.Contains(propNS, p.c.id) {
			t.Fatalf("sealed chunk %v not held", p.c)
		}
		// A second seal changes nothing.
		if err := p.w.Seal(); !errors.Is(err, ErrAlreadyHeld) {
			t.Fatalf("second Seal: %v, want ErrAlreadyHeld", err)
		}
	} else if m.s.Contains(propNS, p.c.id) != heldBefore {
		t.Fatalf("a failed seal changed whether chunk %v is held", p.c)
	}
}

func (m *propModel) get() {
	t, c := m.t, m.pick()
	held := m.s.Contains(propNS, c.id)
	v, err := m.s.Get(propNS, c.id)
	m.logf("get %v: %v", c, err)
	if held != (err == nil) {
		t.Fatalf("Get %v: %v, but Contains said %v", c, err, held)
	}
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get %v: %v", c, err)
		}
		return
	}
	if !bytes.Equal(v.Bytes(), c.data) {
		t.Fatalf("Get %v returned other bytes", c)
	}
	if m.rng.IntN(2) == 0 {
		m.views = append(m.views, &propView{v, c})
	} else {
		v.Release()
	}
}

func (m *propModel) lookup() {
	t := m.t
	ids := make([]ID, 1+m.rng.IntN(4))
	want := -1
	for i := range ids {
		ids[i] = m.pick().id
		if want < 0 && !m.s.Contains(propNS, ids[i]) {
			want = i
		}
	}
	if want < 0 {
		want = len(ids)
	}
	lease := time.Duration(m.rng.IntN(45)) * time.Second // some above the cap
	n, pin, err := m.s.lookup(propNS, ids, lease)
	m.logf("lookup %d ids lease %v: n=%d pin=%d %v", len(ids), lease, n, pin, err)
	if err != nil || n != want || (pin != 0) != (n > 0 && lease > 0) {
		t.Fatalf("Lookup = (%d, %d, %v), want %d leading chunks held", n, pin, err, want)
	}
	if pin != 0 {
		m.leases = append(m.leases, &propLease{pin: pin, ids: ids[:n], expiry: m.clk.Now().Add(min(lease, propPinLease))})
	}
}

func (m *propModel) release() {
	t := m.t
	if len(m.leases) == 0 || m.rng.IntN(10) == 0 {
		if m.s.Release(PinID(1 << 40)) {
			t.Fatal("Release of an unknown lease reported true")
		}
		return
	}
	i := m.rng.IntN(len(m.leases))
	l := m.leases[i]
	m.leases = append(m.leases[:i], m.leases[i+1:]...)
	ok := m.s.Release(l.pin)
	m.logf("release pin %d: %v", l.pin, ok)
	if !ok {
		t.Fatalf("Release of live lease %d reported false", l.pin)
	}
}

func (m *propModel) evict() {
	t, c := m.t, m.pick()
	held := m.s.Contains(propNS, c.id)
	err := m.s.evict(propNS, c.id)
	m.logf("evict %v held=%v pinned=%v: %v", c, held, m.pinned(c.id), err)
	switch {
	case held && m.pinned(c.id):
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("Evict of pinned %v: %v, want ErrBusy", c, err)
		}
	case held:
		if err != nil {
			t.Fatalf("Evict of held %v: %v", c, err)
		}
		if m.s.Contains(propNS, c.id) {
			t.Fatalf("evicted chunk %v still held", c)
		}
		delete(m.mayHold, c.id)
	default:
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Evict of %v, not held: %v, want ErrNotFound", c, err)
		}
	}
}

func (m *propModel) expire() {
	t := m.t
	step := 3 * time.Second
	if m.rng.IntN(5) == 0 {
		step = 12 * time.Second // past every stage lease
	}
	m.clk.Advance(time.Duration(m.rng.Int64N(int64(step))))
	now := m.clk.Now()
	var wantStaged, wantLeases int
	for _, p := range m.staged {
		if !p.expired && !p.deadline.After(now) {
			p.expired = true
			wantStaged++
		}
	}
	live := m.leases[:0]
	for _, l := range m.leases {
		if l.expiry.After(now) {
			live = append(live, l)
		} else {
			wantLeases++
		}
	}
	m.leases = live
	staged, leases := m.s.ExpireNow()
	m.logf("expire at %v: %d staged, %d leases", now.Format(time.TimeOnly), staged, leases)
	if staged != wantStaged || leases != wantLeases {
		t.Fatalf("ExpireNow ended %d stages and %d leases, want %d and %d", staged, leases, wantStaged, wantLeases)
	}
}

// restart closes the store and opens it again. Staged writes, leases and
// views do not survive; every sealed chunk does.
func (m *propModel) restart() {
	t := m.t
	for _, v := range m.views {
		v.v.Release()
	}
	m.views, m.leases, m.staged = nil, nil, nil
	before := m.heldNow()
	if err := m.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.open()
	after := m.heldNow()
	m.logf("restart: %d held before, %d after", len(before), len(after))
	if len(before) != len(after) {
		t.Fatalf("restart: %d chunks held before, %d after", len(before), len(after))
	}
	for id := range before {
		if !after[id] {
			t.Fatalf("restart lost chunk %s", id)
		}
	}
}

func (m *propModel) heldNow() map[ID]bool {
	held := make(map[ID]bool)
	for _, c := range m.universe {
		if m.s.Contains(propNS, c.id) {
			held[c.id] = true
		}
	}
	return held
}

// check verifies the invariants that hold between any two operations.
func (m *propModel) check() {
	t, s := m.t, m.s
	settle(s)
	st := s.Stats()
	if st.UsedBytes > st.LimitBytes || st.UsedBytes+st.RetainedFreeBytes > st.LimitBytes {
		t.Fatalf("UsedBytes %d + RetainedFreeBytes %d over the limit %d", st.UsedBytes, st.RetainedFreeBytes, st.LimitBytes)
	}

	// What is held was sealed, reads back byte-exact, and includes every
	// pinned chunk.
	held := m.heldNow()
	for id := range held {
		if !m.mayHold[id] {
			t.Fatalf("chunk %v is held but was never sealed (or vanished before)", m.byID[id])
		}
	}
	for _, l := range m.leases {
		for _, id := range l.ids {
			if !held[id] {
				t.Fatalf("chunk %v pinned by lease %d is not held", m.byID[id], l.pin)
			}
		}
	}
	m.mayHold = held

	// Slots: every live chunk, staged write and open view has its own.
	entries := make(map[*entry]string)
	var payload, stagedBytes, pinned int64
	for id := range held {
		c := m.byID[id]
		v, err := s.Get(propNS, id)
		if err != nil {
			t.Fatalf("Contains %v but Get: %v", c, err)
		}
		if !bytes.Equal(v.Bytes(), c.data) {
			t.Fatalf("chunk %v reads back other bytes", c)
		}
		entries[v.e] = "chunk " + c.String()
		v.Release()
		payload += int64(c.size)
		if m.pinned(id) {
			pinned++
		}
	}
	var live int64
	for _, p := range m.staged {
		switch {
		case !p.expired:
			entries[p.w.e] = "staged " + p.c.String()
			live++
			stagedBytes += int64(p.c.size)
		case p.direct && p.filled:
			// A direct writer holds its slot past the lease until Seal or
			// Abort, so nothing else can be written into it under the writer.
			entries[p.w.e] = "expired direct write " + p.c.String()
		}
	}
	for _, pv := range m.views {
		if !bytes.Equal(pv.v.Bytes(), pv.c.data) {
			t.Fatalf("bytes under an open View of %v changed", pv.c)
		}
		if _, ok := entries[pv.v.e]; !ok {
			entries[pv.v.e] = "view " + pv.c.String()
		}
	}
	var spans []span
	var slots int64
	for e, what := range entries {
		spans = append(spans, entrySpan(e, what))
		slots += e.slot.seg.slotSize
		if e.slot.seg.slotSize != classSize(int64(e.size)) {
			t.Fatalf("%s is in a slot of %d bytes, its class is %d", what, e.slot.seg.slotSize, classSize(int64(e.size)))
		}
	}
	checkNoOverlap(t, spans)

	// Accounting is the sum over them.
	switch {
	case st.Chunks != int64(len(held)) || st.PayloadBytes != payload:
		t.Fatalf("Stats: %d chunks / %d bytes; held: %d / %d", st.Chunks, st.PayloadBytes, len(held), payload)
	case st.StagedChunks != live || st.StagedBytes != stagedBytes:
		t.Fatalf("Stats: %d staged / %d bytes; model: %d / %d", st.StagedChunks, st.StagedBytes, live, stagedBytes)
	case st.PinnedChunks != pinned:
		t.Fatalf("Stats: %d pinned; model: %d", st.PinnedChunks, pinned)
	case st.UsedBytes != slots:
		t.Fatalf("Stats: UsedBytes %d; live slots sum to %d", st.UsedBytes, slots)
	case st.ChecksumErrors != 0:
		t.Fatalf("%d checksum errors: some chunk's bytes were overwritten", st.ChecksumErrors)
	}
}

// drain ends every handle and checks the store is left with sealed chunks
// only.
func (m *propModel) drain() {
	for _, v := range m.views {
		v.v.Release()
	}
	for _, p := range m.staged {
		p.w.Abort()
	}
	for _, l := range m.leases {
		m.s.Release(l.pin)
	}
	m.views, m.staged, m.leases = nil, nil, nil
	quiescentCheck(m.t, m.s, propNS, m.universe)
}

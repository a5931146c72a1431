package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// slot states, kept per slot in segment.state.
const (
	slotClean uint8 = iota // free, pages not resident
	slotDirty              // free, pages still resident (reused first)
	slotUsed               // held by a staged or sealed chunk
)

// slotRef names one slot of one segment.
type slotRef struct {
	seg  *segment
	slot int32
}

// sizeClass groups the segments whose slots have one size.
type sizeClass struct {
	size      int64
	segs      map[uint32]*segment
	dirty     []slotRef  // free slots with resident pages, LIFO; may hold stale refs
	cleanSegs []*segment // segments that may have clean slots; may hold stale refs
}

// arena allocates slots in shared-memory segments under a hard byte budget.
// It is not safe for concurrent use: the Store's mutex guards it.
//
// Invariants: used <= limit; used + dirtyFree <= limit after every alloc
// (retained free pages are punched before new pages are touched); used is the
// sum of the slot sizes in state slotUsed.
type arena struct {
	dir       string // directory of segment files
	prefix    string // file name prefix, "kvring-<node>-"
	limit     int64
	segTarget int64 // preferred segment length

	used      int64 // bytes of slots in use
	dirtyFree int64 // bytes of free slots whose pages are resident
	classes   map[int64]*sizeClass
	segs      map[uint32]*segment
	nextID    uint32
	dirtyQ    []slotRef // free slots in the order they were freed, for punching
	counts    arenaCounts

	// onSegment is told about every segment created (true) or released (false),
	// so the catalog can record it. Called with the store's mutex held.
	onSegment func(seg *segment, created bool)
	// onSkip is told about every segment path skipped because a file was
	// already there. Called with the store's mutex held.
	onSkip func(path string, err error)
}

// arenaCounts counts where allocated slots came from and the pages given
// back, for Stats.
type arenaCounts struct {
	reused  uint64 // allocs served by a dirty slot of the class (pages resident)
	fresh   uint64 // allocs served by a clean slot (pages allocated and zeroed)
	punched int64  // bytes of retained free slots punched to make room
	skipped uint64 // segment ids skipped: a file was already at their path
}

func newArena(dir, node string, limit, segTarget int64) *arena {
	return &arena{
		dir:       dir,
		prefix:    "kvring-" + node + "-",
		limit:     limit,
		segTarget: segTarget,
		classes:   make(map[int64]*sizeClass),
		segs:      make(map[uint32]*segment),
		nextID:    1,
	}
}

func (a *arena) segmentPath(id uint32) string {
	return filepath.Join(a.dir, fmt.Sprintf("%s%08d.seg", a.prefix, id))
}

func (a *arena) class(size int64) *sizeClass {
	c := a.classes[size]
	if c == nil {
		c = &sizeClass{size: size, segs: make(map[uint32]*segment)}
		a.classes[size] = c
	}
	return c
}

// slotsPerSegment decides how many slots of size cs a new segment gets.
func (a *arena) slotsPerSegment(cs int64) int32 {
	target := min(a.segTarget, a.limit)
	n := target / cs
	return int32(max(1, min(n, 1<<20)))
}

// alloc reserves a slot for a chunk of n bytes (n > 0). fresh reports a
// clean slot, whose pages are not resident: the first write to each page
// faults it in (see prefault). It fails with ErrNoSpace when the budget has
// no room.
func (a *arena) alloc(n int64) (r slotRef, fresh bool, err error) {
	cs := classSize(n)
	if a.used+cs > a.limit {
		return slotRef{}, false, fmt.Errorf("%w in the memory budget: %d bytes needed, %d of %d in use", ErrNoSpace, cs, a.used, a.limit)
	}
	c := a.class(cs)
	// A free slot whose pages are resident costs nothing new.
	for len(c.dirty) > 0 {
		r := c.dirty[len(c.dirty)-1]
		c.dirty = c.dirty[:len(c.dirty)-1]
		if r.seg.mem == nil || r.seg.lost || r.seg.state[r.slot] != slotDirty {
			continue
		}
		r.seg.state[r.slot] = slotUsed
		r.seg.used++
		a.dirtyFree -= cs
		a.used += cs
		a.counts.reused++
		return r, false, nil
	}
	// A clean slot will make its pages resident: give back retained pages first.
	if err := a.punchUntil(a.limit - cs); err != nil {
		return slotRef{}, false, err
	}
	for len(c.cleanSegs) > 0 {
		seg := c.cleanSegs[len(c.cleanSegs)-1]
		if seg.mem == nil || seg.lost || len(seg.clean) == 0 {
			c.cleanSegs = c.cleanSegs[:len(c.cleanSegs)-1]
			seg.inClean = false
			continue
		}
		i := seg.clean[len(seg.clean)-1]
		seg.clean = seg.clean[:len(seg.clean)-1]
		if seg.state[i] != slotClean {
			continue
		}
		seg.state[i] = slotUsed
		seg.used++
		a.used += cs
		a.counts.fresh++
		return slotRef{seg, i}, true, nil
	}
	seg, err := a.newSegment(c)
	if err != nil {
		return slotRef{}, false, err
	}
	i := seg.clean[len(seg.clean)-1]
	seg.clean = seg.clean[:len(seg.clean)-1]
	seg.state[i] = slotUsed
	seg.used++
	a.used += cs
	a.counts.fresh++
	return slotRef{seg, i}, true, nil
}

// allocReclaiming is arena.alloc that, when the budget has no room
// although the policy counted room as made, waits for what frees it and
// tries again: evicted chunks being copied into the Lower tier (their
// slots are freed once the copies end, a memcpy each), or else the
// policy evicting more (the chunks an offer chose may keep their slots a
// while; see policy.reclaim; never keep, the entry that needs the slot), a
// few times. still reports whether the
// caller still wants the slot after mu was released; when it does not,
// the error is ErrRejected. s.mu held; released while it waits.
func (s *Store) allocReclaiming(size int64, keep *entry, still func() bool) (r slotRef, fresh bool, err error) {
	const tries = 32
	for try := 0; ; try++ {
		r, fresh, err = s.arena.alloc(size)
		if err == nil || !errors.Is(err, ErrNoSpace) || try == tries || s.closed {
			return r, fresh, err
		}
		if s.offloading > 0 {
			s.offloaded.Wait()
			try-- // each wait ends an offload: bounded by them
		} else {
			s.mu.Unlock()
			evicted := s.pol.reclaim(classSize(size), keep)
			s.mu.Lock()
			if !evicted {
				return r, fresh, err
			}
		}
		if s.closed {
			return r, fresh, err
		}
		if !still() {
			return slotRef{}, false, fmt.Errorf("%w: evicted while it waited for room", ErrRejected)
		}
	}
}

// maxSegmentSkips bounds how many taken segment paths one newSegment skips
// before it gives up (a directory full of planted files).
const maxSegmentSkips = 16

// newSegment creates the next segment of class c. A path already taken by a
// file the store did not create (planted, or left by another process) is
// skipped, not retried: its id is never used, the onSkip hook is told, and
// the next id is tried, up to maxSegmentSkips times.
func (a *arena) newSegment(c *sizeClass) (*segment, error) {
	var seg *segment
	for skips := 0; ; skips++ {
		id := a.nextID
		var err error
		seg, err = createSegment(id, a.segmentPath(id), c.size, a.slotsPerSegment(c.size))
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || skips >= maxSegmentSkips {
			return nil, err
		}
		a.nextID++
		a.counts.skipped++
		if a.onSkip != nil {
			a.onSkip(a.segmentPath(id), err)
		}
	}
	a.nextID++
	a.addSegment(c, seg)
	if a.onSegment != nil {
		a.onSegment(seg, true)
	}
	return seg, nil
}

// addSegment registers a mapped segment with its class; every slot not
// marked used is clean.
func (a *arena) addSegment(c *sizeClass, seg *segment) {
	if seg.state == nil {
		seg.state = make([]uint8, seg.nslots)
	}
	a.segs[seg.id] = seg
	c.segs[seg.id] = seg
	if seg.id >= a.nextID {
		a.nextID = seg.id + 1
	}
	if len(seg.clean) > 0 {
		c.cleanSegs = append(c.cleanSegs, seg)
		seg.inClean = true
	}
}

// free returns a slot. Its pages stay resident for the next chunk of the same
// class; a segment left with no used slot is released unless it is the only
// one of its class. A slot of a lost segment gives its pages back at once,
// and the segment is released when its last slot is freed.
func (a *arena) free(r slotRef) {
	seg := r.seg
	if seg.mem == nil || seg.state[r.slot] != slotUsed {
		panic(fmt.Sprintf("BUG: store: double free of slot %d in segment %d", r.slot, seg.id))
	}
	cs := seg.slotSize
	c := a.classes[cs]
	seg.used--
	a.used -= cs
	if seg.lost {
		_ = seg.punch(r.slot) // the file is going away; the pages go with it
		seg.state[r.slot] = slotClean
		if seg.used == 0 {
			a.release(c, seg)
		}
		return
	}
	seg.state[r.slot] = slotDirty
	a.dirtyFree += cs
	if seg.used == 0 && len(c.segs) > 1 {
		a.release(c, seg)
		return
	}
	c.dirty = append(c.dirty, r)
	a.dirtyQ = append(a.dirtyQ, r)
	a.compact(c)
}

// release unmaps and deletes an empty segment.
func (a *arena) release(c *sizeClass, seg *segment) {
	for i, st := range seg.state {
		if st == slotDirty {
			a.dirtyFree -= seg.slotSize
			seg.state[i] = slotClean
		}
	}
	delete(c.segs, seg.id)
	delete(a.segs, seg.id)
	if len(c.segs) == 0 {
		delete(a.classes, c.size)
	}
	// Errors here leave a file behind that the next Open removes; the memory
	// accounting is already right.
	_ = seg.close(true)
	if a.onSegment != nil {
		a.onSegment(seg, false)
	}
}

// markLost stops allocation in a segment whose file was deleted or
// truncated: its free pages are given back now and it is released once its
// last slot is freed (at once when it holds none).
func (a *arena) markLost(seg *segment) {
	if seg.lost || seg.mem == nil {
		return
	}
	seg.lost = true
	for i, st := range seg.state {
		if st == slotDirty {
			_ = seg.punch(int32(i))
			seg.state[i] = slotClean
			a.dirtyFree -= seg.slotSize
		}
	}
	if seg.used == 0 {
		a.release(a.classes[seg.slotSize], seg)
	}
}

// punchUntil returns retained free pages to the kernel, oldest first, until
// used + dirtyFree <= target.
func (a *arena) punchUntil(target int64) error {
	for a.used+a.dirtyFree > target && len(a.dirtyQ) > 0 {
		r := a.dirtyQ[0]
		a.dirtyQ[0] = slotRef{}
		a.dirtyQ = a.dirtyQ[1:]
		seg := r.seg
		if seg.mem == nil || seg.state[r.slot] != slotDirty {
			continue
		}
		if err := seg.punch(r.slot); err != nil {
			return err
		}
		seg.state[r.slot] = slotClean
		a.dirtyFree -= seg.slotSize
		a.counts.punched += seg.slotSize
		seg.clean = append(seg.clean, r.slot)
		if !seg.inClean {
			c := a.classes[seg.slotSize]
			c.cleanSegs = append(c.cleanSegs, seg)
			seg.inClean = true
		}
	}
	return nil
}

// compact drops stale references once they outnumber the live ones, so the
// lists stay proportional to the number of slots.
func (a *arena) compact(c *sizeClass) {
	var slots int
	for _, s := range c.segs {
		slots += int(s.nslots)
	}
	if len(c.dirty) > 2*slots+16 {
		c.dirty = filterDirty(c.dirty)
	}
	if len(a.dirtyQ) > 2*int(a.totalSlots())+16 {
		a.dirtyQ = filterDirty(a.dirtyQ)
	}
}

func (a *arena) totalSlots() int64 {
	var n int64
	for _, s := range a.segs {
		n += int64(s.nslots)
	}
	return n
}

// filterDirty keeps the first reference to each slot that is still dirty.
func filterDirty(refs []slotRef) []slotRef {
	seen := make(map[slotRef]bool, len(refs))
	out := refs[:0:0]
	for _, r := range refs {
		if r.seg.mem != nil && r.seg.state[r.slot] == slotDirty && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// residentBytes sums the kernel's count of resident pages over all segments.
func (a *arena) residentBytes() int64 {
	var n int64
	for _, s := range a.segs {
		n += s.residentBytes()
	}
	return n
}

// close unmaps every segment, keeping the files for a warm restart.
func (a *arena) close() error {
	var errs []error
	for _, s := range a.segs {
		if err := s.close(false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

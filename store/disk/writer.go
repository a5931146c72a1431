package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// maxBatch is the most record bytes the writer hands the kernel in one
// pwritev.
const maxBatch = 8 << 20

// writer is the tier's one goroutine: it writes queued records into the
// active region, seals full regions and evicts the oldest when the limit
// is reached. Close stops it after it has written what was queued and
// sealed the active region.
func (t *Tier) writer() {
	defer close(t.done)
	for {
		select {
		case <-t.stop:
			for t.writeQueued() {
			}
			t.sealActive()
			return
		case <-t.kick:
			t.gather()
			for t.writeQueued() {
			}
		}
	}
}

// gather waits up to Config.WriteDelay for the queue to hold gatherBytes,
// returning early on Flush and Close. Writer only.
func (t *Tier) gather() {
	if t.cfg.WriteDelay <= 0 {
		return
	}
	timer := time.NewTimer(t.cfg.WriteDelay)
	defer timer.Stop()
	for t.queuedBytes() < t.cfg.gatherBytes() {
		select {
		case <-t.kick: // another offload: look again
		case <-t.flushNow:
			return
		case <-timer.C:
			return
		case <-t.stop:
			return
		}
	}
}

// queuedBytes is the bytes of the records waiting in the queue.
func (t *Tier) queuedBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.queued
}

// writeQueued writes one batch of queued records and reports whether it
// took any.
func (t *Tier) writeQueued() bool {
	t.mu.Lock()
	var batch []*record
	var n int64
	for len(t.queue) > 0 && n < maxBatch {
		r := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		batch = append(batch, r)
		n += int64(len(r.buf))
	}
	t.qlen.Store(int64(len(t.queue)))
	t.mu.Unlock()
	if len(batch) == 0 {
		return false
	}
	t.writeBatch(batch)
	t.mu.Lock()
	t.idle.Broadcast()
	t.mu.Unlock()
	return true
}

// Flush blocks until every chunk queued before the call is written (or
// dropped). For tests and benchmarks: the data path never waits for it.
func (t *Tier) Flush() {
	select {
	case t.flushNow <- struct{}{}:
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.pending) > 0 && !t.closed {
		t.idle.Wait()
	}
}

// writeBatch writes the records of batch (skipping those removed while
// queued) into the active region, in as few pwritev calls as region
// boundaries allow, and indexes them. Writer only.
func (t *Tier) writeBatch(batch []*record) {
	var (
		r     *region
		start int64
		run   []*record
	)
	flush := func() bool {
		if len(run) == 0 {
			return true
		}
		err := t.writeRun(r, run, start)
		t.finish(r, run, err)
		run = run[:0]
		return err == nil
	}
	for i, rec := range batch {
		t.mu.Lock()
		gone := rec.gone
		t.mu.Unlock()
		if gone {
			t.done1(rec)
			continue
		}
		if r == nil || !t.fits(r, rec) {
			if !flush() {
				t.dropAll(batch[i:], nil)
				return
			}
			reg, err := t.room(rec)
			if err != nil {
				t.dropAll(batch[i:], err)
				return
			}
			r, start = reg, reg.used
		}
		t.place(r, rec)
		run = append(run, rec)
	}
	flush()
}

// place gives rec its position in r, after the records placed before, and
// its header. Writer only.
func (t *Tier) place(r *region, rec *record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off := recordStart(r.ver, r.used, rec.h.size)
	rec.h.seq = uint64(r.seq)
	rec.h.block = uint32(off / posUnit)
	if r.ver < 2 {
		rec.h.block = uint32(off / blockSize)
	}
	putHeader(rec.buf, &rec.h)
	r.hdrs = append(r.hdrs, rec.buf[:rec.h.hlen]...)
	r.nhdrs++
	r.used = off + recordLen(r.ver, rec.h.hlen, rec.h.size)
}

// writeRun writes the records of run, placed in r from start (a block
// boundary) on, in one pwritev: a block-aligned record from its own buffer,
// packed ones copied together into a staging buffer whose last block is
// zero-padded. It leaves r.used at the next block boundary: the next run
// starts there. Writer only.
func (t *Tier) writeRun(r *region, run []*record, start int64) error {
	var stage []byte
	var bufs [][]byte
	// Room for the packed records, their alignment and a block of padding
	// per staging segment (packed records between block-aligned ones).
	var stageBytes int64
	prev := false
	for _, rec := range run {
		p := packed(r.ver, rec.h.size)
		if p {
			stageBytes += recordLen(r.ver, rec.h.hlen, rec.h.size) + posUnit
			if !prev {
				stageBytes += blockSize
			}
		}
		prev = p
	}
	if stageBytes > 0 {
		stage = t.wbufs.get(align(stageBytes))
		defer t.wbufs.put(stage)
	}
	var seg []byte // the staging segment being filled, from segStart
	var segStart, used int64
	var stageOff int64
	closeSeg := func() {
		if seg != nil {
			n := align(used - segStart)
			bufs = append(bufs, seg[:n])
			stageOff += n
			seg = nil
		}
	}
	used = start
	for _, rec := range run {
		off := recordOff(r.ver, rec.h.block)
		n := recordLen(r.ver, rec.h.hlen, rec.h.size)
		if !packed(r.ver, rec.h.size) {
			closeSeg()
			bufs = append(bufs, rec.buf[:n])
			used = off + n
			continue
		}
		if seg == nil {
			segStart = used // a block boundary: the run's start or a padded record's end
			seg = stage[stageOff:]
			clear(seg)
		}
		copy(seg[off-segStart:], rec.buf[:n])
		used = off + n
	}
	closeSeg()
	err := t.pwrite(r, bufs, start)
	t.mu.Lock()
	r.used = align(r.used)
	t.mu.Unlock()
	return err
}

// fits reports whether r is active and has room for rec after the records
// placed in it, with the footer entries and the trailer.
func (t *Tier) fits(r *region, rec *record) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	end := recordStart(r.ver, r.used, rec.h.size) + recordLen(r.ver, rec.h.hlen, rec.h.size)
	return r.active && align(end)+footerLen(len(r.hdrs)+rec.h.hlen)+blockSize <= t.cfg.RegionSize
}

func sum(bufs [][]byte) int64 {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// pwrite writes bufs at off of r's file.
func (t *Tier) pwrite(r *region, bufs [][]byte, off int64) error {
	if f := t.faults.write; f != nil {
		if err := f(r.path); err != nil {
			return err
		}
	}
	if err := pwritevFull(r.fd, bufs, off); err != nil {
		return fmt.Errorf("cannot write %d bytes at %d of %s: %w", sum(bufs), off, r.path, err)
	}
	return nil
}

// finish indexes the records of run after their write, or drops them when
// it failed (err, which degrades the tier). Writer only.
func (t *Tier) finish(r *region, run []*record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.degradeLocked(err)
		// What follows the failed write in this region is unknown: write
		// no more into it. Its earlier records stay readable.
		r.active = false
	}
	for _, rec := range run {
		t.queued -= int64(len(rec.buf))
		if t.pending[rec.key] == rec {
			delete(t.pending, rec.key)
			if err == nil {
				l := loc{region: r.seq, block: rec.h.block, size: rec.h.size, ns: rec.ns, hlen: uint16(rec.h.hlen)}
				if rec.read {
					l.hlen |= locRead
				}
				t.index(rec.key, l)
			}
		}
		if err == nil {
			t.st.offloads++
			t.st.writeBytes += int64(len(rec.buf))
		} else {
			t.st.drops[DropIOError]++
		}
		t.unref(rec)
	}
}

// done1 retires a record that was removed while queued. Writer only.
func (t *Tier) done1(rec *record) {
	t.mu.Lock()
	t.queued -= int64(len(rec.buf))
	t.unref(rec)
	t.mu.Unlock()
}

// dropAll drops records that cannot be written (no region: err says why,
// and degrades the tier when it is an I/O failure). Writer only.
func (t *Tier) dropAll(recs []*record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rec := range recs {
		t.queued -= int64(len(rec.buf))
		if t.pending[rec.key] == rec {
			delete(t.pending, rec.key)
		}
		reason := DropIOError
		if errors.Is(err, errAllPinned) {
			reason = DropPinned
		}
		t.st.drops[reason]++
		t.unref(rec)
	}
}

// errAllPinned: every region is pinned by lookups; nothing can be evicted.
var errAllPinned = errors.New("every region is pinned by lookup leases")

// room returns the active region with room for rec, sealing the active
// one and starting a new one (after evicting the oldest regions over the
// limit) when it is full. Writer only.
func (t *Tier) room(rec *record) (*region, error) {
	t.mu.Lock()
	r := t.activeLocked()
	t.mu.Unlock()
	if r != nil && t.fits(r, rec) {
		return r, nil
	}
	t.sealActive()
	return t.newRegion()
}

// activeLocked is the region the writer appends to, nil when none. mu held.
func (t *Tier) activeLocked() *region {
	if len(t.order) == 0 {
		return nil
	}
	r := t.regions[t.order[len(t.order)-1]]
	if r == nil || !r.active {
		return nil
	}
	return r
}

// sealActive writes the active region's footer and trailer and has the
// syncer fdatasync it. A failure leaves the region readable (the next
// Open scans it) and degrades nothing: the records are on disk. Writer
// only.
func (t *Tier) sealActive() {
	t.mu.Lock()
	r := t.activeLocked()
	if r == nil {
		t.mu.Unlock()
		return
	}
	r.active = false
	hdrs, nh, used := r.hdrs, r.nhdrs, align(r.used)
	t.mu.Unlock()
	fl := footerLen(len(hdrs))
	fb := alignedBuf(fl)
	putFooter(fb, nh, hdrs)
	tb := alignedBuf(blockSize)
	putTrailer(tb, uint64(r.seq), used, fl)
	err := t.pwrite(r, [][]byte{fb}, used)
	if err == nil {
		err = t.pwrite(r, [][]byte{tb}, t.cfg.RegionSize-blockSize)
	}
	t.mu.Lock()
	if err != nil {
		t.mu.Unlock()
		t.log.Warn("cannot seal a disk region; the next start scans it", "region", r.path, "err", err)
		return
	}
	r.footOff, r.footLen = used, fl
	r.hdrs, r.nhdrs = nil, 0
	t.st.sealed++
	r.refs++ // the syncer's
	t.mu.Unlock()
	t.syncLater(r)
}

// newRegion evicts the oldest regions until one more fits the limit, then
// creates, allocates and heads a new region file. Writer only.
func (t *Tier) newRegion() (*region, error) {
	t.mu.Lock()
	if t.degraded != nil && t.cfg.Now().UnixNano() < t.retryAt {
		err := t.degraded
		t.mu.Unlock()
		return nil, err
	}
	var victims []*region
	for int64(len(t.order)+1)*t.cfg.RegionSize > t.cfg.Limit {
		v := t.victimLocked()
		if v == nil {
			t.mu.Unlock()
			return nil, errAllPinned
		}
		victims = append(victims, v)
	}
	seq := t.nextSeq
	t.nextSeq++
	t.mu.Unlock()
	for _, v := range victims {
		t.evict(v, true)
	}
	path := filepath.Join(t.cfg.Dir, regionName(seq))
	r, err := t.createRegion(seq, path)
	if errors.Is(err, unix.ENOSPC) && t.giveUpRegion() {
		r, err = t.createRegion(seq, path)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.degradeLocked(err)
		return nil, err
	}
	if t.degraded != nil {
		t.log.Info("disk tier offloads again", "region", path)
	}
	t.degraded = nil
	t.dirInode = inode(t.cfg.Dir)
	t.regions[seq] = r
	t.order = append(t.order, seq)
	t.st.regionsCreated++
	return r, nil
}

// giveUpRegion evicts one region because the filesystem has no room for a
// new one (it holds less than the limit, or something else filled it): the
// tier goes on within the space it has rather than stopping. It reports
// false when no region can go (the tier then degrades). Writer only.
func (t *Tier) giveUpRegion() bool {
	t.mu.Lock()
	v := t.victimLocked()
	if v != nil {
		t.st.regionsGivenUp++
	}
	t.mu.Unlock()
	if v == nil {
		return false
	}
	t.log.Warn("the disk tier's filesystem is full: a region is evicted to make room (it holds less than --disk-limit)",
		"region", v.path)
	return t.evict(v, false)
}

// createRegion creates region seq's file, allocates its space (so that a
// full disk fails here, not in the middle of a record) and writes its
// header.
func (t *Tier) createRegion(seq uint32, path string) (*region, error) {
	fd, err := openFile(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, t.direct)
	if err != nil {
		return nil, fmt.Errorf("cannot create disk region: %w", err)
	}
	fail := func(err error) (*region, error) {
		_ = unix.Close(fd)
		_ = os.Remove(path)
		return nil, err
	}
	if err := unix.Fallocate(fd, 0, 0, t.cfg.RegionSize); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return fail(fmt.Errorf("cannot allocate %d bytes for disk region %s: %w", t.cfg.RegionSize, path, err))
		}
		if err := unix.Ftruncate(fd, t.cfg.RegionSize); err != nil {
			return fail(fmt.Errorf("cannot size disk region %s: %w", path, err))
		}
	}
	r := &region{seq: seq, ver: t.cfg.version(), path: path, fd: fd, used: blockSize, active: true}
	hb := alignedBuf(blockSize)
	putRegionHeader(hb, uint64(seq), t.cfg.RegionSize, r.ver)
	if err := t.pwrite(r, [][]byte{hb}, 0); err != nil {
		return fail(err)
	}
	return r, nil
}

// victimLocked takes the region to evict out of the write order: the
// oldest that holds no chunk any more (all removed, dropped or written
// again elsewhere), or else the oldest by write order that no lease pins.
// Its chunks stay readable until evict drops them. nil when every region
// is pinned or active. mu held.
func (t *Tier) victimLocked() *region {
	now := t.cfg.Now().UnixNano()
	vi := -1
	for i, seq := range t.order {
		r := t.regions[seq]
		if r.active {
			continue
		}
		if r.live == 0 {
			vi = i
			break
		}
		if vi < 0 && r.pinnedUntil <= now {
			vi = i
		}
	}
	if vi < 0 {
		return nil
	}
	r := t.regions[t.order[vi]]
	t.order = append(t.order[:vi:vi], t.order[vi+1:]...)
	r.refs++ // evict's: the file stays open for reinsert
	t.st.regionsEvicted++
	return r
}

// evict drops region v, which victimLocked took out of the write order,
// with its chunks and its file; with reinsert, the chunks read since they
// were written go back into the write queue first (reinsert). It reports
// whether the file is gone. Writer only.
func (t *Tier) evict(v *region, reinsert bool) bool {
	if reinsert {
		t.reinsert(v)
	}
	t.mu.Lock()
	t.dropRegionLocked(v)
	v.refs--
	t.closeRegion(v)
	t.mu.Unlock()
	if err := os.Remove(v.path); err != nil && !os.IsNotExist(err) {
		t.log.Warn("cannot remove an evicted disk region", "region", v.path, "err", err)
		return false
	}
	return true
}

// dropRegionLocked removes r and its chunks from the index. mu held.
func (t *Tier) dropRegionLocked(r *region) {
	delete(t.regions, r.seq)
	for _, k := range r.keys {
		if l, ok := t.idx[k]; ok && l.region == r.seq {
			delete(t.idx, k)
			t.bytes -= int64(l.size)
			t.st.chunksEvicted++
		}
	}
	r.keys = nil
	r.dead = true
	t.closeRegion(r)
}

package store

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// recover rebuilds the store from the catalog after a restart: it maps the
// segments that still exist (openSegments), verifies each catalogued
// chunk's checksum and serves the good ones (recoverChunks), returns the
// pages of every other slot to the kernel (freeOtherSlots), removes segment
// files of this node that the catalog does not know, and offers the chunks
// to the eviction policy (offerRecovered). It runs inside Open, before any
// other method can be called.
func (s *Store) recover() (int, error) {
	segRecs, chunkRecs, malformed, err := s.cat.load()
	if err != nil {
		return 0, err
	}
	if malformed > 0 {
		s.log.Warn("malformed catalog records were dropped", "records", malformed)
	}
	segs, chunkRecs, err := s.openSegments(segRecs, chunkRecs)
	if err != nil {
		return 0, err
	}
	entries := s.recoverChunks(segs, chunkRecs)
	recovered := len(entries)
	if err := s.freeOtherSlots(segs); err != nil {
		return 0, err
	}
	if err := s.removeStrayFiles(segs); err != nil {
		s.log.Warn("cannot remove stray segment files", "err", err)
	}
	if err := s.cat.flush(); err != nil {
		// The changes stay queued; Health reports the catalog meanwhile.
		s.log.Error("cannot write the recovered catalog; its changes are kept and retried", "err", err)
	}
	if dropped := s.offerRecovered(entries); dropped > 0 {
		s.log.Warn("recovered chunks did not fit the memory limit and were dropped", "chunks", dropped, "limit_bytes", s.cfg.MemoryLimit)
		recovered -= dropped
		if err := s.cat.flush(); err != nil {
			s.log.Error("cannot write the recovered catalog; its changes are kept and retried", "err", err)
		}
	}
	return recovered, nil
}

// openSegments maps the catalogued segments that still exist. When none
// does (the host rebooted) the catalog is discarded and no chunk record is
// returned; the records of segments that are gone are queued for deletion.
func (s *Store) openSegments(segRecs []segmentRecord, chunkRecs []chunkRecord) (map[uint32]*segment, []chunkRecord, error) {
	a := s.arena
	// Segment ids are never reused, across restarts too.
	a.nextID = max(a.nextID, s.cat.nextSegment)
	segs := make(map[uint32]*segment, len(segRecs))
	var missing []uint32
	for _, rec := range segRecs {
		id := rec.id
		if segs[id] != nil {
			continue
		}
		seg, err := openSegment(id, a.segmentPath(id), rec.slotSize, rec.nslots)
		if err != nil {
			missing = append(missing, id)
			continue
		}
		seg.state = make([]uint8, seg.nslots)
		segs[id] = seg
	}
	switch {
	case len(segRecs) > 0 && len(segs) == 0:
		s.log.Warn("catalog discarded: its shared-memory segments are gone (was the host rebooted?)",
			"segments", len(segRecs), "chunks", len(chunkRecs), "shm_dir", s.cfg.ShmDir)
		if err := s.cat.reset(); err != nil {
			return nil, nil, err
		}
		chunkRecs = nil
	case len(missing) > 0:
		s.log.Warn("some catalogued segments are gone; their chunks are dropped", "missing_segments", len(missing))
		for _, id := range missing {
			s.cat.queue(catOp{kind: opSegmentDel, key: segKey(id)})
		}
	}
	return segs, chunkRecs, nil
}

// recoverChunks indexes every catalogued chunk whose slot is sound and
// whose bytes pass their checksum, and queues the others' records for
// deletion. It returns the entries it indexed, in the catalog's order.
func (s *Store) recoverChunks(segs map[uint32]*segment, chunkRecs []chunkRecord) []*entry {
	a := s.arena
	var bad int
	recovered := make([]*entry, 0, len(chunkRecs))
	if len(s.idx.m) == 0 {
		s.idx.m = make(map[uint64]*entry, len(chunkRecs))
	}
	sound := soundChunks(segs, chunkRecs)
	for i, r := range chunkRecs {
		seg := segs[r.seg]
		if !sound[i] {
			if seg != nil {
				bad++
			}
			s.cat.queue(catOp{kind: opChunkDel, key: chunkKeyBytes(r.seg, r.slot)})
			continue
		}
		k, _, _ := s.key(r.ns, r.id, true)
		e := &entry{key: k, hash: k.hash(), slot: slotRef{seg, r.slot}, size: r.size, crc: r.crc,
			place: r.place, name: r.name, state: stateSealed, hasSlot: true, policy: true}
		if s.idx.get(k, e.hash) != nil {
			bad++
			s.cat.queue(catOp{kind: opChunkDel, key: chunkKeyBytes(r.seg, r.slot)})
			continue
		}
		seg.state[r.slot] = slotUsed
		seg.used++
		a.used += seg.slotSize
		s.idx.put(e)
		s.st.chunks++
		s.st.payloadBytes += int64(e.size)
		s.nsSealed(e, 1)
		recovered = append(recovered, e)
	}
	if bad > 0 {
		s.log.Warn("catalogued chunks failed verification and were dropped", "chunks", bad)
	}
	return recovered
}

// soundChunks reports for each record whether its slot is sound (an
// existing, clean slot of its segment that holds its size, a valid
// namespace) and its bytes pass their checksum. The checksums, most of a
// restart's time (a first touch of every page, then one pass over it), are
// computed on one goroutine per CPU, each over its own share of the
// records; it returns when all are done. It only reads segs and the slots.
func soundChunks(segs map[uint32]*segment, recs []chunkRecord) []bool {
	sound := make([]bool, len(recs))
	workers := min(runtime.GOMAXPROCS(0), max(len(recs)/1024, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(recs); i += workers {
				sound[i] = soundChunk(segs[recs[i].seg], recs[i])
			}
		})
	}
	wg.Wait()
	return sound
}

// soundChunk is one record of soundChunks.
func soundChunk(seg *segment, r chunkRecord) bool {
	if seg == nil || r.slot < 0 || r.slot >= seg.nslots || int64(r.size) > seg.slotSize || r.size <= 0 ||
		seg.state[r.slot] != slotClean || ValidateNamespace(r.ns) != nil {
		return false
	}
	sum, err := guardedChecksum(seg.slot(r.slot)[:r.size])
	return err == nil && sum == r.crc
}

// freeOtherSlots gives back the pages of every slot not in use, lists it
// as clean, and hands the segments to the arena.
func (s *Store) freeOtherSlots(segs map[uint32]*segment) error {
	a := s.arena
	for _, seg := range segs {
		for i := int32(0); i < seg.nslots; i++ {
			if seg.state[i] == slotUsed {
				continue
			}
			if err := seg.punch(i); err != nil {
				return err
			}
			seg.clean = append(seg.clean, i)
		}
		a.addSegment(a.class(seg.slotSize), seg)
	}
	return nil
}

// offerRecovered tells the policy about every recovered chunk (all, as
// recoverChunks indexed them). They fit the budget unless the limit shrank
// since they were written; the policy then evicts or declines some, and
// those are dropped. It returns how many were dropped.
func (s *Store) offerRecovered(all []*entry) int {
	if r, ok := s.pol.(interface{ reserve(n int) }); ok {
		r.reserve(len(all))
	}
	var dropped int
	for _, e := range all {
		if !s.pol.offer(e, e.slot.seg.slotSize) {
			s.pol.wait()
			if !s.pol.offer(e, e.slot.seg.slotSize) {
				e.rejected = true
			}
		}
	}
	s.pol.wait()
	s.mu.Lock()
	for _, e := range all {
		if e.state == stateSealed && (e.rejected || e.evicted) {
			s.kill(e, reasonPolicy)
		}
		if e.state != stateSealed {
			dropped++ // declined here, or evicted by the policy's callback
		}
	}
	s.mu.Unlock()
	return dropped
}

// removeStrayFiles deletes this node's segment files that no catalogued
// segment uses (left by a crash between creating a file and cataloguing it).
func (s *Store) removeStrayFiles(known map[uint32]*segment) error {
	names, err := filepath.Glob(filepath.Join(s.arena.dir, s.arena.prefix+"*.seg"))
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(known))
	for _, seg := range known {
		keep[seg.path] = true
	}
	var removed int
	for _, n := range names {
		if keep[n] || !strings.HasSuffix(n, ".seg") {
			continue
		}
		if err := os.Remove(n); err != nil {
			return err
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed stray segment files", "files", removed)
	}
	return nil
}

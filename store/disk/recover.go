package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/store"
)

// recover indexes the region files of the directory, oldest first, so that
// a chunk found in two regions is served from the newer. A sealed region
// is indexed from its footer (two reads); one without a trailer is scanned
// record header by record header (one block read each) up to the first
// that does not decode, and is not written to again. A file that is not a
// region of this tier's size (a bad header) is removed. Regions over the
// limit (it was lowered) are evicted, oldest first. Runs inside Open.
func (t *Tier) recover() error {
	start := time.Now()
	ents, err := os.ReadDir(t.cfg.Dir)
	if err != nil {
		return fmt.Errorf("cannot list disk tier directory %q: %w", t.cfg.Dir, err)
	}
	var seqs []uint32
	for _, e := range ents {
		if seq, ok := parseRegionName(e.Name()); ok && e.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	var scanned, bad int
	for _, seq := range seqs {
		path := filepath.Join(t.cfg.Dir, regionName(seq))
		r, hdrs, wasScanned, err := t.openRegion(seq, path)
		if err != nil {
			bad++
			t.log.Warn("disk region unreadable; removed", "region", path, "err", err)
			_ = os.Remove(path)
			continue
		}
		if wasScanned {
			scanned++
		}
		t.regions[seq] = r
		t.order = append(t.order, seq)
		for _, h := range hdrs {
			n, ok := t.intern(h.ns)
			if !ok {
				continue
			}
			t.index(key(h.ns, store.ID(h.id)), loc{region: seq, block: h.block, size: h.size, ns: n, hlen: uint16(h.hlen)})
		}
		t.nextSeq = max(t.nextSeq, seq+1)
	}
	for int64(len(t.order))*t.cfg.RegionSize > t.cfg.Limit {
		v := t.victimLocked()
		if v == nil {
			break
		}
		t.evict(v, false)
	}
	t.log.Info("disk tier opened", "dir", t.cfg.Dir, "direct_io", t.direct, "regions", len(t.order),
		"scanned_regions", scanned, "removed_regions", bad, "chunks", len(t.idx), "bytes", t.bytes,
		"limit_bytes", t.cfg.Limit, "region_bytes", t.cfg.RegionSize, "duration", time.Since(start).Round(time.Microsecond))
	return nil
}

// openRegion opens region seq read-only and returns its record headers:
// from its footer, or scanned when it has none (scanned set).
func (t *Tier) openRegion(seq uint32, path string) (r *region, hdrs []recHeader, scanned bool, err error) {
	fd, err := openFile(path, unix.O_RDONLY, t.direct)
	if err != nil {
		return nil, nil, false, err
	}
	r = &region{seq: seq, path: path, fd: fd}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, false, err
	}
	size := st.Size
	b := alignedBuf(blockSize)
	if err := t.pread(r, [][]byte{b}, 0); err != nil {
		return nil, nil, false, err
	}
	hs, hsize, ver, err := parseRegionHeader(b)
	if err != nil {
		return nil, nil, false, err
	}
	if hs != uint64(seq) || hsize != t.cfg.RegionSize {
		return nil, nil, false, fmt.Errorf("%w: region %d of %d bytes in the file of region %d (region size now %d)", errFormat, hs, hsize, seq, t.cfg.RegionSize)
	}
	r.ver = ver
	if size >= hsize {
		if err := t.pread(r, [][]byte{b}, hsize-blockSize); err == nil {
			if off, n, err := parseTrailer(b, uint64(seq), hsize); err == nil {
				fb := alignedBuf(n)
				if err := t.pread(r, [][]byte{fb}, off); err == nil {
					if hdrs, err := parseFooter(fb); err == nil && sane(hdrs, seq, ver, off) {
						r.used, r.footOff, r.footLen = off, off, n
						return r, hdrs, false, nil
					}
				}
			}
		}
	}
	// No usable footer: scan the records.
	r.used, hdrs = t.scan(r, size)
	return r, hdrs, true, nil
}

// scan reads the record headers of region r (size bytes on disk) front to
// back up to the first that does not decode where one should be, keeps
// them in r.hdrs and returns where the records end. In a version 2 region
// a header that does not decode at an offset inside a block (the zeros
// that end a write batch, or that precede a block-aligned record) sends
// the scan to the next block boundary.
func (t *Tier) scan(r *region, size int64) (int64, []recHeader) {
	var hdrs []recHeader
	off := int64(blockSize)
	hb := alignedBuf(2 * blockSize) // a header never spans more than two blocks
	for off < size {
		if r.ver >= 2 {
			off = (off + posUnit - 1) &^ (posUnit - 1) // where a packed record would start
		}
		start := off &^ (blockSize - 1)
		n := min(int64(len(hb)), (size-start)&^(blockSize-1))
		if n == 0 {
			break
		}
		if err := t.pread(r, [][]byte{hb[:n]}, start); err != nil {
			break
		}
		h, err := parseHeader(hb[off-start : n])
		if err != nil || h.seq != uint64(r.seq) || recordOff(r.ver, h.block) != off || recordStart(r.ver, off, h.size) != off {
			if r.ver >= 2 && off != start {
				off = align(off)
				continue
			}
			break
		}
		end := off + recordLen(r.ver, h.hlen, h.size)
		if end > size {
			break
		}
		h.meta = append([]byte(nil), h.meta...)
		hdrs = append(hdrs, h)
		r.hdrs = append(r.hdrs, hb[off-start:off-start+int64(h.hlen)]...)
		r.nhdrs++
		off = end
	}
	return off, hdrs
}

// sane reports whether every header of a footer lies inside its region,
// before the footer.
func sane(hdrs []recHeader, seq, ver uint32, footOff int64) bool {
	for _, h := range hdrs {
		off := recordOff(ver, h.block)
		if h.seq != uint64(seq) || off < blockSize || off+recordLen(ver, h.hlen, h.size) > footOff {
			return false
		}
	}
	return true
}

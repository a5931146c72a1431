package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// checkBoltFile reads a bbolt file from disk, without bbolt and without
// mapping it, and reports the first damage that would make bbolt panic,
// fault or loop when it opens the file for writing: bbolt then walks every
// reachable page, comparing keys, in a goroutine of its own, where a panic
// ends the process. It checks the meta pages (magic, version, checksum,
// bounds), then every page reachable from the root bucket: its id and
// overflow lie below the high-water mark and inside the file, its header
// names it, its elements, keys and values lie inside it, branch pages have
// elements, inline buckets are leaf pages, no page is reached twice (which
// also rules out cycles), nesting stays shallow, and keys are ordered as
// bbolt's own check wants (strictly increasing in a page, within the range
// the parent branch gives a child). Any damage bbolt's check would report
// must be found here: bbolt reports it by panicking in the opening
// goroutine while its checking goroutine keeps reading a rolled-back
// transaction, which crashes the process. It reports the value of
// meta/node_id when that record is reachable through intact pages, even if
// other pages are damaged. Little-endian layout (bbolt writes the host's
// order; kvring runs on little-endian hosts). Blocks on the disk.
func checkBoltFile(f *os.File) (nodeID string, err error) {
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	c := &boltChecker{f: f, size: st.Size(), seen: make(map[uint64]bool)}
	if err := c.readMeta(); err != nil {
		return "", err
	}
	c.page(c.root, 0, "", nil, nil)
	return c.nodeID, errors.Join(c.errs...)
}

// bbolt's layout (go.etcd.io/bbolt internal/common).
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeader     = 16
	boltElementSize    = 16
	boltBranchPage     = 0x01
	boltLeafPage       = 0x02
	boltBucketLeafFlag = 0x01
	boltMaxDepth       = 64
	boltMaxErrors      = 8
)

type boltChecker struct {
	f        *os.File
	size     int64
	pageSize int64
	root     uint64 // root page of the root bucket
	highPage uint64 // first page id past the database
	seen     map[uint64]bool
	errs     []error
	nodeID   string
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// meta parses and validates the meta page at off.
func (c *boltChecker) meta(off int64) (pageSize uint32, root, high, txid uint64, ok bool) {
	var b [boltPageHeader + 64]byte
	if _, err := c.f.ReadAt(b[:], off); err != nil {
		return 0, 0, 0, 0, false
	}
	m := b[boltPageHeader:]
	h := fnv.New64a()
	h.Write(m[:56])
	if le32(m[0:]) != boltMagic || le32(m[4:]) != boltVersion || le64(m[56:]) != h.Sum64() {
		return 0, 0, 0, 0, false
	}
	return le32(m[8:]), le64(m[16:]), le64(m[40:]), le64(m[48:]), true
}

// readMeta picks the meta page bbolt would use: the valid one with the
// higher transaction id.
func (c *boltChecker) readMeta() error {
	ps, _, _, _, ok := c.meta(0)
	if !ok {
		for try := int64(1024); try <= 64<<10; try *= 2 {
			if ps, _, _, _, ok = c.meta(try); ok && int64(ps) == try {
				break
			}
			ok = false
		}
	}
	if !ok || ps < 1024 || ps > 64<<10 || ps&(ps-1) != 0 {
		return errors.New("no valid meta page")
	}
	c.pageSize = int64(ps)
	ps0, root0, high0, tx0, ok0 := c.meta(0)
	ps1, root1, high1, tx1, ok1 := c.meta(c.pageSize)
	switch {
	case ok1 && (!ok0 || tx1 > tx0):
		ps0, root0, high0 = ps1, root1, high1
	case !ok0:
		return errors.New("no valid meta page")
	}
	if int64(ps0) != c.pageSize {
		return fmt.Errorf("meta page size %d differs from %d", ps0, c.pageSize)
	}
	if high0 < 3 || high0 > uint64(c.size/c.pageSize) {
		return fmt.Errorf("high-water mark %d does not fit a file of %d pages", high0, c.size/c.pageSize)
	}
	c.root, c.highPage = root0, high0
	return nil
}

func (c *boltChecker) fail(format string, args ...any) {
	if len(c.errs) < boltMaxErrors {
		c.errs = append(c.errs, fmt.Errorf(format, args...))
	}
}

// page checks page id and everything below it, whose keys must lie in
// [minKey, maxKey) (nil: unbounded), and returns the largest key below it
// as bbolt's check works it out; bucket names the bucket it belongs to (""
// for the root bucket).
func (c *boltChecker) page(id uint64, depth int, bucket string, minKey, maxKey []byte) []byte {
	if len(c.errs) >= boltMaxErrors {
		return nil
	}
	if depth > boltMaxDepth {
		c.fail("page %d: nested deeper than %d", id, boltMaxDepth)
		return nil
	}
	if id < 2 || id >= c.highPage {
		c.fail("page id %d out of range [2, %d)", id, c.highPage)
		return nil
	}
	if c.seen[id] {
		c.fail("page %d reached twice", id)
		return nil
	}
	c.seen[id] = true
	var hdr [boltPageHeader]byte
	if _, err := c.f.ReadAt(hdr[:], int64(id)*c.pageSize); err != nil {
		c.fail("page %d: %v", id, err)
		return nil
	}
	overflow := uint64(le32(hdr[12:]))
	if le64(hdr[0:]) != id || id+overflow >= c.highPage {
		c.fail("page %d: header names page %d with %d overflow pages", id, le64(hdr[0:]), overflow)
		return nil
	}
	for i := id + 1; i <= id+overflow; i++ {
		if c.seen[i] {
			c.fail("page %d reached twice", i)
			return nil
		}
		c.seen[i] = true
	}
	buf := make([]byte, int64(overflow+1)*c.pageSize)
	if _, err := c.f.ReadAt(buf, int64(id)*c.pageSize); err != nil && !errors.Is(err, io.EOF) {
		c.fail("page %d: %v", id, err)
		return nil
	}
	return c.elements(id, buf, depth, bucket, minKey, maxKey)
}

// elements checks the elements of a page held in buf (a page of the file,
// or an inline bucket's page inside a value) as page does, and returns the
// largest key below it.
func (c *boltChecker) elements(id uint64, buf []byte, depth int, bucket string, minKey, maxKey []byte) []byte {
	flags, count := binary.LittleEndian.Uint16(buf[8:]), int(binary.LittleEndian.Uint16(buf[10:]))
	if flags != boltBranchPage && flags != boltLeafPage {
		c.fail("page %d: flags %#x, want a branch or leaf page", id, flags)
		return nil
	}
	if boltPageHeader+count*boltElementSize > len(buf) {
		c.fail("page %d: %d elements do not fit %d bytes", id, count, len(buf))
		return nil
	}
	if flags == boltBranchPage && count == 0 {
		// bbolt's cursor reads a branch page's first element unchecked.
		c.fail("page %d: a branch page without elements", id)
		return nil
	}
	keys := make([][]byte, count)
	vals := make([][]byte, count)
	for i := range count {
		at := uint64(boltPageHeader + i*boltElementSize)
		e := buf[at : at+boltElementSize]
		var pos, ksize, vsize uint64
		if flags == boltBranchPage {
			pos, ksize = uint64(le32(e[0:])), uint64(le32(e[4:]))
		} else {
			pos, ksize, vsize = uint64(le32(e[4:])), uint64(le32(e[8:])), uint64(le32(e[12:]))
		}
		if end := at + pos + ksize + vsize; end > uint64(len(buf)) {
			c.fail("page %d: element %d ends at %d, past the page's %d bytes", id, i, end, len(buf))
			return nil
		}
		keys[i] = buf[at+pos : at+pos+ksize]
		vals[i] = buf[at+pos+ksize : at+pos+ksize+vsize]
	}
	// The order bbolt's check wants (tx_check.go, verifyKeyOrder): each key
	// at least the range's lower bound, above the largest key before it,
	// below the range's upper bound.
	running := minKey
	for i, k := range keys {
		switch {
		case i == 0 && running != nil && bytes.Compare(running, k) > 0,
			i > 0 && bytes.Compare(running, k) >= 0,
			maxKey != nil && bytes.Compare(k, maxKey) >= 0:
			c.fail("page %d: key %d out of order", id, i)
			return nil
		}
		if flags == boltLeafPage {
			running = k
			e := buf[boltPageHeader+i*boltElementSize:]
			switch {
			case le32(e[0:])&boltBucketLeafFlag != 0:
				c.bucket(id, k, vals[i], depth, bucket)
			case bucket == string(bucketMeta) && string(k) == string(keyNodeID):
				c.nodeID = string(vals[i])
			}
			continue
		}
		next := maxKey
		if i < count-1 {
			next = keys[i+1]
		}
		child := le64(buf[boltPageHeader+i*boltElementSize+8:])
		running = c.page(child, depth+1, bucket, k, next)
		if len(c.errs) > 0 && running == nil {
			return nil
		}
	}
	return running
}

// bucket checks a nested bucket whose header is v.
func (c *boltChecker) bucket(id uint64, name, v []byte, depth int, parent string) {
	if parent != "" {
		// kvring's buckets all sit in the root bucket; deeper ones are
		// checked all the same, under a name no record of ours uses.
		name = []byte(parent + "/" + string(name))
	}
	if len(v) < 16 {
		c.fail("page %d: bucket %q header of %d bytes", id, name, len(v))
		return
	}
	if root := le64(v[0:]); root != 0 {
		c.page(root, depth+1, string(name), nil, nil)
		return
	}
	inline := v[16:]
	if len(inline) < boltPageHeader {
		c.fail("page %d: inline bucket %q of %d bytes", id, name, len(inline))
		return
	}
	if binary.LittleEndian.Uint16(inline[8:]) != boltLeafPage {
		// bbolt resolves every page of an inline bucket to the inline page
		// itself: a branch there would loop.
		c.fail("page %d: inline bucket %q is not a leaf page", id, name)
		return
	}
	c.elements(id, inline, depth+1, string(name), nil, nil)
}

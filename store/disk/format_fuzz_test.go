package disk

import (
	"testing"
)

// FuzzParseRegion feeds arbitrary bytes to every parser of region data:
// none may panic, and whatever decodes must be what an encoder writes.
func FuzzParseRegion(f *testing.F) {
	h := recHeader{seq: 3, block: 2, size: 1000, crc: 7, ns: "ns:abc", meta: []byte("meta")}
	hb := make([]byte, headerLen(h.ns, h.meta))
	putHeader(hb, &h)
	f.Add(hb)
	fb := make([]byte, footerLen(2*len(hb)))
	putFooter(fb, 2, append(append([]byte(nil), hb...), hb...))
	f.Add(fb)
	tb := make([]byte, blockSize)
	putTrailer(tb, 3, blockSize, blockSize)
	f.Add(tb)
	rb := make([]byte, blockSize)
	putRegionHeader(rb, 3, 1<<20, version)
	f.Add(rb)
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := parseHeader(b); err == nil {
			again := make([]byte, headerLen(h.ns, h.meta))
			putHeader(again, &h)
			if string(again) != string(b[:h.hlen]) {
				t.Fatalf("header does not re-encode to its bytes")
			}
		}
		if hdrs, err := parseFooter(b); err == nil {
			for _, h := range hdrs {
				if h.size == 0 || h.hlen < recHdrFixed+4 {
					t.Fatalf("footer header %+v", h)
				}
			}
		}
		_, _, _ = parseTrailer(b, 3, 1<<20)
		_, _, _, _ = parseRegionHeader(b)
	})
}

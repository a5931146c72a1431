package clustertest

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
)

// TestFrameReaderCountsFramesHoweverTheBytesAreSplit: the frames of a
// dialer's direction (the client preface, then frames) are counted by type
// whether they pass in one write or byte by byte.
func TestFrameReaderCountsFramesHoweverTheBytesAreSplit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fr.WriteSettings())
	must(fr.WriteData(1, false, make([]byte, 300)))
	must(fr.WritePing(false, [8]byte{1}))
	must(fr.WriteWindowUpdate(0, 1000))
	must(fr.WriteData(1, true, nil))
	want := map[http2.FrameType]int{http2.FrameSettings: 1, http2.FrameData: 2, http2.FramePing: 1, http2.FrameWindowUpdate: 1}
	for _, step := range []int{buf.Len(), 1, 7, 9, 10} {
		n := NewNetwork()
		r := frameReader{counts: &n.frames, sent: true, skip: len(http2.ClientPreface)}
		b := buf.Bytes()
		for len(b) > 0 {
			k := min(step, len(b))
			r.feed(b[:k])
			b = b[k:]
		}
		got := n.Frames().Sent
		if len(got) != len(want) {
			t.Fatalf("in pieces of %d bytes: counted %v, want %v", step, got, want)
		}
		for ft, c := range want {
			if got[ft] != c {
				t.Fatalf("in pieces of %d bytes: counted %v, want %v", step, got, want)
			}
		}
	}
}

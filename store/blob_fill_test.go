package store

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestFillReadsTheWholeBlobAndItsChecksum: Fill reads a blob's length from
// a source that returns a few bytes per Read (and from one that returns
// EOF with its last bytes), and Sum then reports the checksum of exactly
// those bytes.
func TestFillReadsTheWholeBlobAndItsChecksum(t *testing.T) {
	s := openTest(t, testConfig(t, 16<<20))
	data := bytes.Repeat([]byte("0123456789abcdef"), (600<<10)/16)
	data[len(data)-1] = 'X'
	for name, r := range map[string]io.Reader{
		"one byte a read": iotest.OneByteReader(bytes.NewReader(data[:70<<10])),
		"EOF with data":   iotest.DataErrReader(bytes.NewReader(data)),
		"whole":           bytes.NewReader(data),
	} {
		want := data
		if name == "one byte a read" {
			want = data[:70<<10]
		}
		b, err := s.CreateBlob(int64(len(want)))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Fill(r); err != nil {
			t.Fatalf("%s: Fill: %v", name, err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("%s: the blob holds other bytes", name)
		}
		sum, ok := b.Sum()
		if !ok || sum != Checksum(want) {
			t.Fatalf("%s: Sum = %08x, %v; want %08x, true", name, sum, ok, Checksum(want))
		}
		b.Free()
	}
}

// TestFillOfAShortSourceIsAnErrorWithoutASum: a source that ends before
// the blob's length is io.ErrUnexpectedEOF, and the blob has no sum.
func TestFillOfAShortSourceIsAnErrorWithoutASum(t *testing.T) {
	s := openTest(t, testConfig(t, 16<<20))
	b, err := s.CreateBlob(300 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	err = b.Fill(bytes.NewReader(make([]byte, 200<<10)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Fill of 200 KiB into 300 KiB = %v, want io.ErrUnexpectedEOF", err)
	}
	if _, ok := b.Sum(); ok {
		t.Fatal("a blob Fill did not finish has a sum")
	}
	if err := b.Fill(iotest.ErrReader(io.ErrClosedPipe)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Fill from a failing source = %v, want its error", err)
	}
}

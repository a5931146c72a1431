package resp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestInbufReadsAsBufioDoes runs the same random reads on an inbuf and a
// bufio.Reader of the same size over the same bytes, arriving in pieces
// of random sizes, and wants the same results, errors included.
func TestInbufReadsAsBufioDoes(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		data := make([]byte, rng.IntN(4000))
		for i := range data {
			data[i] = "ab\r\n*$"[rng.IntN(6)]
		}
		size := 16 + rng.IntN(200)
		src := func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }
		want, got := bufio.NewReaderSize(src(), size), newInbuf(src(), size)
		if want.Size() != size {
			t.Fatalf("bufio made a buffer of %d, not %d", want.Size(), size)
		}
		for step := 0; step < 400; step++ {
			op := rng.IntN(6)
			n := rng.IntN(size + 20)
			a, b := inbufOp(want, op, n), inbufOp(got, op, n)
			if a != b {
				t.Fatalf("seed %d step %d op %d(%d): bufio %s, inbuf %s", seed, step, op, n, a, b)
			}
		}
	}
}

// bufReader is what inbuf shares with bufio.Reader.
type bufReader interface {
	ReadByte() (byte, error)
	Peek(int) ([]byte, error)
	Discard(int) (int, error)
	Read([]byte) (int, error)
	ReadSlice(byte) ([]byte, error)
	Buffered() int
}

func inbufOp(r bufReader, op, n int) string {
	switch op {
	case 0:
		c, err := r.ReadByte()
		return fmt.Sprintf("ReadByte %q %v", c, err)
	case 1:
		p, err := r.Peek(n)
		return fmt.Sprintf("Peek %q %v", p, err)
	case 2:
		k, err := r.Discard(n)
		return fmt.Sprintf("Discard %d %v", k, err)
	case 3:
		p := make([]byte, n)
		k, err := r.Read(p)
		return fmt.Sprintf("Read %q %v", p[:k], err)
	case 4:
		p, err := r.ReadSlice('\n')
		return fmt.Sprintf("ReadSlice %q %v", p, err)
	}
	return fmt.Sprintf("Buffered %d", r.Buffered())
}

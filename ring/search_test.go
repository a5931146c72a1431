package ring

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestResumeHashIsXXHash64 checks the resumable hash against xxhash.Sum64
// for every input length up to 160 bytes and every counter position with 8
// bytes or more after it, with random bytes: a mismatch would make
// SearchPartition pick keys of other partitions than Partition says.
func TestResumeHashIsXXHash64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 12; n <= 160; n++ {
		in := make([]byte, n)
		for pos := 0; pos+12 <= n; pos++ {
			for i := range in {
				in[i] = byte(rng.Uint32())
			}
			st := newResumeHash(in, pos)
			for _, c := range []uint32{0, rng.Uint32(), ^uint32(0)} {
				binary.BigEndian.PutUint32(in[pos:], c)
				if got, want := st.sum(c), xxhash.Sum64(in); got != want {
					t.Fatalf("n=%d pos=%d c=%x: %x, xxhash %x", n, pos, c, got, want)
				}
			}
		}
	}
}

// TestSearchPartitionFindsThePlainLoopsKey compares SearchPartition with
// the loop over Partition it replaces, for namespaces of several lengths
// (short, stripe-crossing, past the stack buffer) and counter positions.
func TestSearchPartitionFindsThePlainLoopsKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PartitionCount = 509
	r, err := New([]Member{{ID: "a"}, {ID: "b"}}, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"", "resp:default", "resp:a-rather-longer-model-name/v1", string(bytes.Repeat([]byte("n"), 140))} {
		for _, at := range []int{0, 13, 18, 21, 28} {
			for want := 0; want < 509; want += 37 {
				key := make([]byte, 32)
				copy(key, "kvring/resp/slot")
				plain := append([]byte(nil), key...)
				wantC, wantOK := uint32(0), false
				for c := range uint32(64 * 509) {
					binary.BigEndian.PutUint32(plain[at:], c)
					if r.Partition(ns, plain) == want {
						wantC, wantOK = c, true
						break
					}
				}
				c, ok := r.SearchPartition(ns, key, at, want, 64*509)
				if c != wantC || ok != wantOK || (ok && !bytes.Equal(key, plain)) {
					t.Fatalf("ns %q at %d want %d: %d %v, plain loop %d %v", ns, at, want, c, ok, wantC, wantOK)
				}
			}
		}
	}
}

// TestSearchPartitionReportsNoKey: a search whose tries run out says so.
func TestSearchPartitionReportsNoKey(t *testing.T) {
	r, err := New([]Member{{ID: "a"}}, 1, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	if _, ok := r.SearchPartition("ns", key, 18, 5, 0); ok {
		t.Fatal("found a key in no tries")
	}
}

func BenchmarkSearchPartition(b *testing.B) {
	r, err := New([]Member{{ID: "a"}, {ID: "b"}, {ID: "c"}}, 1, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 32)
	copy(key, "kvring/resp/slot")
	b.Run("search", func(b *testing.B) {
		for i := range b.N {
			binary.BigEndian.PutUint16(key[16:], uint16(i))
			r.SearchPartition("resp:default", key, 18, i%DefaultPartitionCount, 1<<22)
		}
	})
	b.Run("plain", func(b *testing.B) {
		for i := range b.N {
			binary.BigEndian.PutUint16(key[16:], uint16(i))
			r.searchSlow("resp:default", key, 18, i%DefaultPartitionCount, 1<<22)
		}
	})
}

// TestIsModIsTheRemainder checks the divisibility test against % for odd,
// even and power-of-two divisors at the edges of uint64.
func TestIsModIsTheRemainder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []uint64{1, 2, 3, 7, 8, 509, 1024, 65520, 65521, 65536, 1<<32 + 1} {
		for range 2000 {
			h := rng.Uint64()
			switch rng.IntN(4) {
			case 0:
				h = h % (4 * d)
			case 1:
				h = ^uint64(0) - h%(4*d)
			}
			r := h % d
			if rng.IntN(2) == 0 {
				r = rng.Uint64() % d
			}
			if got, want := newIsMod(d, r).test(h), h%d == r; got != want {
				t.Fatalf("d=%d r=%d h=%d: %v, want %v", d, r, h, got, want)
			}
		}
	}
}

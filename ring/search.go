package ring

import (
	"encoding/binary"
	"math/bits"
)

// SearchPartition finds the first counter c below tries for which key, with c
// written big-endian into key[at:at+4], falls in partition want of namespace:
// Partition(namespace, key) == want. It leaves that key in key and returns c;
// ok is false (key then holds the last counter tried) when none of the
// tries does. key is the caller's and written in place.
//
// It returns what the loop over Partition would, faster: xxHash64's state
// over the bytes before the counter is worked out once and each try hashes
// only from the 32-byte stripe or 8-byte word that holds the counter on.
// Keys with fewer than 8 bytes after the counter, or a namespace and key
// longer than 152 bytes together, take the plain loop. A search for one of P partitions takes about P tries, so this
// is for callers that must find a key of a given partition (the Redis
// Cluster slots' placement keys) and cache it.
func (r *Ring) SearchPartition(namespace string, key []byte, at int, want int, tries uint32) (uint32, bool) {
	var buf [160]byte
	n := 8 + len(namespace) + len(key)
	if n > len(buf) || at < 0 || at+4 > len(key)-8 {
		return r.searchSlow(namespace, key, at, want, tries)
	}
	binary.LittleEndian.PutUint64(buf[:8], uint64(len(namespace)))
	copy(buf[8+copy(buf[8:], namespace):], key)
	pos := 8 + len(namespace) + at
	st := newResumeHash(buf[:n], pos)
	m := newIsMod(uint64(r.cfg.PartitionCount), uint64(want))
	for c := range tries {
		if m.test(st.sum(c)) {
			binary.BigEndian.PutUint32(key[at:], c)
			return c, true
		}
	}
	if tries > 0 {
		binary.BigEndian.PutUint32(key[at:], tries-1)
	}
	return 0, false
}

// searchSlow is SearchPartition's plain loop, for the keys its fast path
// does not take.
func (r *Ring) searchSlow(namespace string, key []byte, at int, want int, tries uint32) (uint32, bool) {
	for c := range tries {
		binary.BigEndian.PutUint32(key[at:], c)
		if r.Partition(namespace, key) == want {
			return c, true
		}
	}
	return 0, false
}

// isMod tests h % d == r without a division: h - r must be a multiple of
// d, that is (with d = 2^k·odd) its low k bits zero and the rest times the
// inverse of odd modulo 2^64 at most (2^64-1)/odd (Granlund and Montgomery's
// divisibility test).
type isMod struct {
	r, inv, limit uint64
	k             int
}

func newIsMod(d, r uint64) isMod {
	k := bits.TrailingZeros64(d)
	odd := d >> k
	inv := odd // Newton's iteration: each step doubles the correct low bits (3, 6, ... 96)
	for range 5 {
		inv *= 2 - odd*inv
	}
	return isMod{r: r, inv: inv, limit: ^uint64(0) / odd, k: k}
}

func (m isMod) test(h uint64) bool {
	if h < m.r {
		return false
	}
	x := h - m.r
	return x&(1<<m.k-1) == 0 && (x>>m.k)*m.inv <= m.limit
}

// xxHash64's primes.
const (
	xxP1 uint64 = 11400714785074694791
	xxP2 uint64 = 14029467366897019727
	xxP3 uint64 = 1609587929392839161
	xxP4 uint64 = 9650029242287828579
	xxP5 uint64 = 2870177450012600261
)

// resumeHash is xxHash64 (seed 0) of inputs of one length that differ only
// in the four bytes at pos, a big-endian counter: the input is kept as
// little-endian words, and the state over the words before the 32-byte
// stripe (inputs of 32 bytes or more) or tail word that holds the counter
// is worked out once, so sum hashes only the rest. The counter always lies
// in whole words: keyHash's inputs end with at least 10 bytes after it.
type resumeHash struct {
	words  [20]uint64 // the input's whole words (160 bytes at most), counter bytes as last set
	nw     int        // whole words
	rest   []byte     // the bytes after them (fewer than 8)
	n      int        // input length
	cw, sh int        // word and bit shift of the counter's first byte
	base   [2]uint64  // the counter's words with its bytes zero
	stripe int        // the first stripe word sum hashes (a multiple of 4); stripes end at full
	full   int        // whole stripes' words (0 below 32 bytes)
	v      [4]uint64  // lanes before stripe
	word   int        // the first tail word sum hashes, when stripe == full
	h      uint64     // state before word, when stripe == full
}

// newResumeHash keeps in (at most 160 bytes, pos+4 at most len(in)-8) and
// the state over what comes before pos.
func newResumeHash(in []byte, pos int) *resumeHash {
	s := &resumeHash{n: len(in), nw: len(in) / 8, rest: in[len(in)&^7:], cw: pos / 8, sh: 8 * (pos % 8)}
	for i := range s.nw {
		s.words[i] = binary.LittleEndian.Uint64(in[8*i:])
	}
	const ones = uint64(1)<<32 - 1
	s.base = [2]uint64{s.words[s.cw] &^ (ones << s.sh), s.words[s.cw+1] &^ (ones >> (64 - s.sh))}
	s.set(0)
	if s.n >= 32 {
		s.full = s.nw &^ 3
	}
	p1 := xxP1 // a variable: the lanes' seeds wrap around
	s.v = [4]uint64{p1 + xxP2, xxP2, 0, -p1}
	s.stripe = min(s.cw&^3, s.full)
	s.v = xxStripes(s.v, s.words[:s.stripe])
	if s.stripe < s.full {
		return s
	}
	s.h = s.start(s.v)
	for s.word = s.full; s.word < s.cw; s.word++ {
		s.h = xxWord(s.h, s.words[s.word])
	}
	return s
}

// set writes counter c into the words.
func (s *resumeHash) set(c uint32) {
	rc := uint64(bits.ReverseBytes32(c))
	s.words[s.cw] = s.base[0] | rc<<s.sh
	s.words[s.cw+1] = s.base[1] | rc>>(64-s.sh)
}

// start is the state the tail begins from, after lanes v.
func (s *resumeHash) start(v [4]uint64) uint64 {
	h := xxP5
	if s.n >= 32 {
		h = bits.RotateLeft64(v[0], 1) + bits.RotateLeft64(v[1], 7) + bits.RotateLeft64(v[2], 12) + bits.RotateLeft64(v[3], 18)
		for _, x := range v {
			h = (h^xxRound(0, x))*xxP1 + xxP4
		}
	}
	return h + uint64(s.n)
}

// sum is xxHash64 of the input with counter c.
func (s *resumeHash) sum(c uint32) uint64 {
	if s.stripe == s.full {
		return s.tailSum(c)
	}
	s.set(c)
	h := s.start(xxStripes(s.v, s.words[s.stripe:s.full]))
	for i := s.full; i < s.nw; i++ {
		h = xxWord(h, s.words[i])
	}
	return xxFinish(h, s.rest)
}

// tailSum is sum when the counter is in the tail (s.word == s.cw): its
// words are made in registers, not stored, so one try does not wait for
// the last one's stores.
func (s *resumeHash) tailSum(c uint32) uint64 {
	rc := uint64(bits.ReverseBytes32(c))
	h := xxWord(s.h, s.base[0]|rc<<s.sh)
	i := s.cw + 1
	if i < s.nw {
		h = xxWord(h, s.base[1]|rc>>(64-s.sh))
		i++
	}
	for ; i < s.nw; i++ {
		h = xxWord(h, s.words[i])
	}
	return xxFinish(h, s.rest)
}

// xxFinish hashes the last bytes (fewer than 8) from state h and mixes the
// result.
func xxFinish(h uint64, rest []byte) uint64 {
	if len(rest) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(rest)) * xxP1
		h = bits.RotateLeft64(h, 23)*xxP2 + xxP3
		rest = rest[4:]
	}
	for _, b := range rest {
		h ^= uint64(b) * xxP5
		h = bits.RotateLeft64(h, 11) * xxP1
	}
	h ^= h >> 33
	h *= xxP2
	h ^= h >> 29
	h *= xxP3
	return h ^ h>>32
}

func xxRound(acc, in uint64) uint64 {
	return bits.RotateLeft64(acc+in*xxP2, 31) * xxP1
}

func xxWord(h, w uint64) uint64 {
	return bits.RotateLeft64(h^xxRound(0, w), 27)*xxP1 + xxP4
}

// xxStripes runs the lanes over w, a whole number of 32-byte stripes as
// words.
func xxStripes(v [4]uint64, w []uint64) [4]uint64 {
	for ; len(w) >= 4; w = w[4:] {
		v[0] = xxRound(v[0], w[0])
		v[1] = xxRound(v[1], w[1])
		v[2] = xxRound(v[2], w[2])
		v[3] = xxRound(v[3], w[3])
	}
	return v
}

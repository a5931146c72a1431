package store

import (
	"testing"
	"time"
)

// lruBenchEntries are n entries of namespaces 0 and 1 (alternately), with
// distinct hashes, for the policy benchmarks.
func lruBenchEntries(n int) []*entry {
	es := make([]*entry, n)
	for i := range es {
		k := chunkKey{ns: uint32(i % 2), id: testID(uint64(i))}
		es[i] = &entry{key: k, hash: k.hash(), size: 1000}
	}
	return es
}

// lruEvictRound offers every entry of es in turn to l, which holds fewer:
// each offer evicts the oldest (one chunk of each namespace in two), and
// touches the entry offered half the budget ago, as a lookup would.
func lruEvictRound(l *lru, es []*entry, held int) {
	for i, e := range es {
		l.offer(e, 1024)
		if i >= held/2 {
			l.touch(es[i-held/2].hash)
		}
	}
}

// BenchmarkLRUEviction measures the LRU policy's offer (each evicting one
// chunk) and touch with shares off (one list, the default) and on (two
// namespaces, one guaranteed half the budget), alternating blocks of the
// two in the same run, and reports ns per offer of each and their ratio
// (shares-ratio: on / off).
func BenchmarkLRUEviction(b *testing.B) {
	const held, round = 4096, 4 * 4096
	es := lruBenchEntries(round)
	evict := func(*entry, bool) bool { return true }
	off := newLRU(held*1024, evict, func(*entry) {})
	on := newLRU(held*1024, evict, func(*entry) {})
	on.setShares(map[uint32]shareLimits{0: {guarantee: held * 1024 / 2}})
	var tOff, tOn time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		lruEvictRound(off, es, held)
		t1 := time.Now()
		lruEvictRound(on, es, held)
		tOff += t1.Sub(t0)
		tOn += time.Since(t1)
	}
	n := float64(b.N * round)
	b.ReportMetric(float64(tOff.Nanoseconds())/n, "off-ns/offer")
	b.ReportMetric(float64(tOn.Nanoseconds())/n, "on-ns/offer")
	b.ReportMetric(float64(tOn)/float64(tOff), "shares-ratio")
}

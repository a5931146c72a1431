package trace

import (
	"math"
	"testing"
)

// TestStaticOracleOnTinySequence: the oracle keeps the most referenced ids
// and still misses their first reference.
func TestStaticOracleOnTinySequence(t *testing.T) {
	reqs := []Request{{HashIDs: []int64{1, 2, 1, 3, 1, 2, 4}}}
	// capacity 1 keeps id 1 (3 refs): hits on its 2nd and 3rd reference.
	if got := StaticOracle(reqs, 1); math.Abs(got-2.0/7) > 1e-9 {
		t.Fatalf("capacity 1: %v, want 2/7", got)
	}
	// capacity 2 keeps 1 and 2: 3 hits.
	if got := StaticOracle(reqs, 2); math.Abs(got-3.0/7) > 1e-9 {
		t.Fatalf("capacity 2: %v, want 3/7", got)
	}
}

// TestStaticOracleOnTheMooncakeTrace pins the figures docs/benchmarks.md
// quotes: a frequency oracle beats the LRU by far less than 1.3× here.
func TestStaticOracleOnTheMooncakeTrace(t *testing.T) {
	reqs := loadSyntheticTrace(t)
	distinct := Stats(reqs).DistinctIDs
	for _, c := range []struct {
		pct  int
		want float64
	}{{5, 0.1975}, {10, 0.3170}} {
		got := StaticOracle(reqs, distinct*c.pct/100)
		if math.Abs(got-c.want) > 0.00005 {
			t.Errorf("%d %%: static oracle %.4f, want %.4f", c.pct, got, c.want)
		}
	}
}

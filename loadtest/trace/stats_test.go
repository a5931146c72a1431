package trace

import "testing"

func TestStatsCountsRepeatsAsHitsWeightedByTokens(t *testing.T) {
	t.Parallel()
	reqs := []Request{
		{InputLength: 1024 + 100, HashIDs: []int64{1, 2, 3}}, // 512, 512, 100 tokens
		{InputLength: 512 + 12, HashIDs: []int64{1, 4}},      // 1 hits: 512 of 524
		{InputLength: 1024 + 100, HashIDs: []int64{1, 2, 3}}, // all hit: 1124 tokens
	}
	s := Stats(reqs)
	want := Summary{
		Requests: 3, BlocksReferenced: 8, DistinctIDs: 4,
		UnboundedHitRatio:      4.0 / 8,
		UnboundedTokenHitRatio: float64(512+1124) / float64(1124+524+1124),
	}
	if s != want {
		t.Errorf("Stats = %+v\nwant    %+v", s, want)
	}
	if s := Stats(nil); s != (Summary{}) {
		t.Errorf("Stats(nil) = %+v", s)
	}
}

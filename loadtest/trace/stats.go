package trace

// Summary holds the figures of a trace replayed against an unbounded cache.
type Summary struct {
	Requests         int // number of requests
	BlocksReferenced int // block accesses: the sum of len(HashIDs)
	DistinctIDs      int // distinct block ids
	// UnboundedHitRatio is the fraction of block accesses whose id was seen
	// before, in arrival order.
	UnboundedHitRatio float64
	// UnboundedTokenHitRatio is the same, each block weighted by its token count.
	UnboundedTokenHitRatio float64
}

// Stats computes the Summary of reqs, taken in slice order. It does not modify reqs.
func Stats(reqs []Request) Summary {
	s := Summary{Requests: len(reqs)}
	seen := make(map[int64]struct{})
	var hitTokens, allTokens int64
	hits := 0
	for _, r := range reqs {
		for i, id := range r.HashIDs {
			n := int64(r.BlockTokenCount(i))
			allTokens += n
			if _, ok := seen[id]; ok {
				hits++
				hitTokens += n
			} else {
				seen[id] = struct{}{}
			}
		}
		s.BlocksReferenced += len(r.HashIDs)
	}
	s.DistinctIDs = len(seen)
	s.UnboundedHitRatio = ratio(int64(hits), int64(s.BlocksReferenced))
	s.UnboundedTokenHitRatio = ratio(hitTokens, allTokens)
	return s
}

// ratio returns a/b, and 0 when b is 0.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

package placement

// DefaultSchemes returns the schemes the report compares, a fresh slice each call.
//
//   - A: per chunk (kvring today).
//   - B32, B64, B128: fixed groups of K chunks (512, 1024, 2048 tokens), every group asked at once.
//   - C32, C128: B(K) with early stop, one group per round trip; C32w: B32 with early stop in doubling waves
//     (1, 2, 4, … groups per round trip).
//   - D32h4: C32w, the first 2 groups of every prompt spread over 4 owners, picked by request hash.
//   - D32hot: C32w, groups looked up 8 times or more spread over 4 owners, picked by request hash.
//   - D32hot8, D64hot8: C32w (or its K=64 twin), groups looked up 8 times or more spread over 8 owners,
//     the least-loaded asked.
//   - D32hot8r: D32hot8 with a random owner asked (hash of the request): a client that knows nothing of load.
//   - D32hot8p2: D32hot8 with the less loaded of two random owners asked (power of two choices): what kvring's
//     nodes and SDK do, with the load figures nodes report in their answers.
//   - D32hot8p2s: D32hot8p2 with the group spread over its spread set (ring.SpreadSet, as kvring does) instead of
//     its first 8 ring owners.
//   - D32hotNp2: D32hot8p2s with the spread width growing with the cluster, ring.SpreadWidth(N): 8 up to 64
//     nodes, N/8 above (kvring's default).
//   - D32ll: D32h4 with the least-loaded of the 4 owners.
//   - E-geo: position-dependent groups 32, 32, 64, 128, 256, … (doubling, capped at 1024 chunks), early
//     stop in doubling waves, first 2 groups spread over 4 owners by request hash.
//   - E-geo128: groups 32, 32, 64, then 128 chunks, early stop in doubling waves, hot groups (8 lookups)
//     spread over 8 owners, the least-loaded asked.
//   - E-p2c: B32 with every group on 2 owners and the least-loaded asked (power of two choices).
func DefaultSchemes() []Scheme {
	geo := []int{32, 32, 64, 128, 256, 512, 1024}
	return []Scheme{
		{Name: "A", Groups: []int{1}},
		{Name: "B32", Groups: []int{32}},
		{Name: "B64", Groups: []int{64}},
		{Name: "B128", Groups: []int{128}},
		{Name: "C32", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 1},
		{Name: "C128", Groups: []int{128}, EarlyStop: true, FirstWave: 1, WaveGrowth: 1},
		{Name: "C32w", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2},
		{Name: "D32h4", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadLeading, Leading: 2, Replicas: 4, Pick: PickHash},
		{Name: "D32hot", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 4, Pick: PickHash},
		{Name: "D32hot8", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, Pick: PickLeastLoaded},
		{Name: "D32hot8r", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, Pick: PickHash},
		{Name: "D32hot8p2", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, Pick: PickTwoChoices},
		{Name: "D32hot8p2s", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, Members: MembersSpreadSet, Pick: PickTwoChoices},
		{Name: "D32hotNp2", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, GrowWidth: true, Members: MembersSpreadSet, Pick: PickTwoChoices},
		{Name: "D64hot8", Groups: []int{64}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, Pick: PickLeastLoaded},
		{Name: "D32ll", Groups: []int{32}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadLeading, Leading: 2, Replicas: 4, Pick: PickLeastLoaded},
		{Name: "E-geo", Groups: geo, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadLeading, Leading: 2, Replicas: 4, Pick: PickHash},
		{Name: "E-geo128", Groups: []int{32, 32, 64, 128}, EarlyStop: true, FirstWave: 1, WaveGrowth: 2,
			Spread: SpreadHot, HotAfter: 8, Replicas: 8, Pick: PickLeastLoaded},
		{Name: "E-p2c", Groups: []int{32}, Spread: SpreadAll, Replicas: 2, Pick: PickLeastLoaded},
	}
}

package trace

import "testing"

func TestBlockTokenCountSumsToInputLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 511, 512, 513, 1024, 6955} {
		r := Request{InputLength: n}
		blocks := BlocksFor(n)
		sum := 0
		for i := range blocks {
			c := r.BlockTokenCount(i)
			if c <= 0 || c > BlockTokens || (i < blocks-1 && c != BlockTokens) {
				t.Errorf("input %d: block %d has %d tokens", n, i, c)
			}
			sum += c
		}
		if sum != n {
			t.Errorf("input %d: blocks hold %d tokens", n, sum)
		}
		if r.BlockTokenCount(blocks) != 0 || r.BlockTokenCount(-1) != 0 {
			t.Errorf("input %d: out-of-range block has tokens", n)
		}
	}
	if got := BlocksFor(6955); got != 14 {
		t.Errorf("BlocksFor(6955) = %d, want 14", got)
	}
}

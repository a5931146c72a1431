package placement

import (
	"slices"
	"testing"
)

func TestGroupBoundsRepeatTheLastSize(t *testing.T) {
	t.Parallel()
	s := Scheme{Groups: []int{2, 3}}
	if got, want := s.groupBounds(nil, 10), []int{0, 2, 5, 8, 10}; !slices.Equal(got, want) {
		t.Fatalf("groupBounds(10) = %v, want %v", got, want)
	}
	if got := s.groupBounds(nil, 0); !slices.Equal(got, []int{0}) {
		t.Fatalf("groupBounds(0) = %v, want [0]", got)
	}
}

func TestSkewAndPercentile(t *testing.T) {
	t.Parallel()
	if got := maxOverMean([]int64{1, 3}); got != 1.5 {
		t.Errorf("maxOverMean([1 3]) = %v, want 1.5", got)
	}
	if got := maxOverMean([]int64{0, 0}); got != 0 {
		t.Errorf("maxOverMean of zeros = %v, want 0", got)
	}
	v := make([]int32, 100)
	for i := range v {
		v[i] = int32(100 - i) // 100 … 1
	}
	if got := percentile(v, 0.99); got != 99 {
		t.Errorf("p99 of 1..100 = %v, want 99", got)
	}
	if v[0] != 100 {
		t.Error("percentile modified its input")
	}
	// Every request asks all nodes: the random floor is exactly 1.
	if got := randomSkew([]int32{4, 4, 4}, 4, 1); got != 1 {
		t.Errorf("randomSkew when every request asks every node = %v, want 1", got)
	}
}

package client

import (
	"testing"
	"time"
)

func TestConnBackoffDoublesUpToMax(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: 5 * time.Second, jitter: 0.2}
	want := []time.Duration{0, 100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for n, w := range want {
		// r = 0.5 is the middle of the jitter range: factor 1.
		if got := b.delay(n, 0.5); got != w*time.Millisecond {
			t.Errorf("delay(%d) = %s, want %s", n, got, w*time.Millisecond)
		}
	}
	if got := b.delay(1_000_000, 0.5); got != b.max {
		t.Errorf("delay(1e6) = %s, want max %s", got, b.max)
	}
}

func TestConnBackoffJitterStaysInRangeAndUnderMax(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: 5 * time.Second, jitter: 0.2}
	for _, c := range []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 80 * time.Millisecond},
		{1, 0.999999, 119_999_960 * time.Nanosecond},
		{3, 0, 320 * time.Millisecond},
		{20, 0, 4 * time.Second},
		{20, 0.999999, 5 * time.Second}, // 1.2 × max is capped
	} {
		if got := b.delay(c.n, c.r); got != c.want {
			t.Errorf("delay(%d, %g) = %s, want %s", c.n, c.r, got, c.want)
		}
	}
	if got := (backoff{base: time.Second, max: time.Second}).delay(5, 0); got != time.Second {
		t.Errorf("no jitter: delay = %s, want 1s", got)
	}
}

package client

import "time"

// backoff computes how long the connection loop waits before an attempt: exponential from base, capped at max,
// with multiplicative jitter so that many engines that lost the same node do not reconnect in lockstep.
//
// backoff is a pure value: the caller passes the random number, so the delays are deterministic under test.
type backoff struct {
	base   time.Duration // delay after the first failure
	max    time.Duration // no delay exceeds max, jitter included
	jitter float64       // fraction in [0, 1]: the delay is scaled by a factor in [1-jitter, 1+jitter]
}

// delay returns the wait after n consecutive failed attempts (n >= 1; n <= 0 means no wait):
// base·2^(n-1), capped at max, scaled by 1 + jitter·(2r-1) for r in [0, 1), and capped at max again.
func (b backoff) delay(n int, r float64) time.Duration {
	if n <= 0 || b.base <= 0 {
		return 0
	}
	d := b.base
	for i := 1; i < n && d < b.max; i++ {
		d *= 2 // d < max here, so doubling cannot overflow for any sane max
	}
	d = min(d, b.max)
	d = time.Duration(float64(d) * (1 + b.jitter*(2*r-1)))
	return max(min(d, b.max), 0)
}

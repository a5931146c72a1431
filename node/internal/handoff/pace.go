package handoff

import (
	"context"
	"sync"
	"time"
)

// pacer spaces copies so that bytes leave at no more than rate per second
// on average, with a burst of one second's worth. Safe for concurrent use.
type pacer struct {
	mu    sync.Mutex
	rate  int64 // bytes per second; <= 0: unpaced
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	next  time.Time // when the bytes sent so far are paid for
}

// wait blocks until n more bytes may be sent, or ctx ends.
func (p *pacer) wait(ctx context.Context, n int64) error {
	if p.rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := p.now()
	if burst := now.Add(-time.Second); p.next.Before(burst) {
		p.next = burst
	}
	p.next = p.next.Add(time.Duration(float64(n) / float64(p.rate) * float64(time.Second)))
	d := p.next.Sub(now)
	p.mu.Unlock()
	if d > 0 {
		return p.sleep(ctx, d)
	}
	return nil
}

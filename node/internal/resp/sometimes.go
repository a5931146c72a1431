package resp

import (
	"sync/atomic"
	"time"
)

// sometimes rate-limits a log line: ok is true at most once per every.
// The zero value allows one line a minute. Safe for concurrent use.
type sometimes struct {
	every time.Duration
	last  atomic.Int64 // unix nanoseconds of the last line
}

// ok reports whether a line may be logged at now, and if so counts it.
func (s *sometimes) ok(now time.Time) bool {
	every := s.every
	if every == 0 {
		every = time.Minute
	}
	last := s.last.Load()
	if last != 0 && now.UnixNano()-last < int64(every) {
		return false
	}
	return s.last.CompareAndSwap(last, now.UnixNano())
}

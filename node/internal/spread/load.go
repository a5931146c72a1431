package spread

import (
	"sync"
	"time"
)

// Meter counts the read calls (lookups, Has, gets, fetches) a node serves,
// in one-second windows, for the load hint its answers carry. Safe for
// concurrent use; Add and Rate take one mutex briefly.
type Meter struct {
	now  func() time.Time
	mu   sync.Mutex
	win  int64 // the current window's second
	cur  uint32
	last uint32 // calls in the window before (0 when it was not the last second)
}

// NewMeter returns a Meter on clock now (time.Now when nil).
func NewMeter(now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	return &Meter{now: now}
}

// Add counts one call. A nil Meter counts nothing.
func (m *Meter) Add() {
	if m == nil {
		return
	}
	sec := m.now().Unix()
	m.mu.Lock()
	m.roll(sec)
	m.cur++
	m.mu.Unlock()
}

// Rate is the calls served per second lately: the last full second's count,
// or the current one's when it is already higher. 0 for a nil Meter.
func (m *Meter) Rate() uint32 {
	if m == nil {
		return 0
	}
	sec := m.now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(sec)
	return max(m.last, m.cur)
}

func (m *Meter) roll(sec int64) {
	if sec == m.win {
		return
	}
	if sec == m.win+1 {
		m.last = m.cur
	} else {
		m.last = 0
	}
	m.win, m.cur = sec, 0
}

// loadHintTTL is how long a reported load is believed.
const loadHintTTL = 10 * time.Second

// Loads are the load hints other members reported (Meter.Rate, carried in
// their answers), by member id. Safe for concurrent use.
type Loads struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]loadHint
}

type loadHint struct {
	rate uint32
	at   time.Time
}

// NewLoads returns an empty Loads on clock now (time.Now when nil).
func NewLoads(now func() time.Time) *Loads {
	if now == nil {
		now = time.Now
	}
	return &Loads{now: now, m: map[string]loadHint{}}
}

// Note records that member id reported rate.
func (l *Loads) Note(id string, rate uint32) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[id] = loadHint{rate: rate, at: l.now()}
}

// Of returns the load member id reported lately (0 when unknown or old).
func (l *Loads) Of(id string) uint32 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.m[id]
	if !ok || l.now().Sub(h.at) > loadHintTTL {
		return 0
	}
	return h.rate
}

// Forget drops the hints of members not in keep (they left the ring).
func (l *Loads) Forget(keep map[string]bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.m {
		if !keep[id] {
			delete(l.m, id)
		}
	}
}

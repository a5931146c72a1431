package store

import (
	"sync"
	"testing"
)

// scriptedPolicy is an eviction policy whose admission refusals the test
// decides, so that tests of what the store does with a refusal do not depend
// on TinyLFU's frequency sketch (which ristretto feeds through lossy,
// asynchronous buffers) or on scheduling. An offer of a chunk the test marked
// refused is not admitted, and the refusal reaches the store (onReject) only
// when the test calls deliver or the store calls settle or wait: as with
// ristretto, whose decisions arrive on its own goroutine at some point before
// its Wait returns, but at a point the test chooses. Every other chunk goes to
// a real LRU.
type scriptedPolicy struct {
	policy   // the LRU, for every chunk not refused
	onReject func(*entry)

	mu      sync.Mutex
	refuse  map[ID]bool
	pending []*entry // refused offers whose decision the store has not heard
}

// openScripted opens a store with cfg whose policy is a scriptedPolicy.
func openScripted(t testing.TB, cfg Config) (*Store, *scriptedPolicy) {
	t.Helper()
	var p *scriptedPolicy
	s, err := open(cfg, func(cfg *Config, onEvict evictFunc, onReject func(*entry)) (policy, error) {
		p = &scriptedPolicy{policy: newLRU(cfg.MemoryLimit, onEvict, onReject), onReject: onReject, refuse: make(map[ID]bool)}
		return p, nil
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// setRefused makes the policy refuse (or, with false, admit again) every
// later offer of the chunk id.
func (p *scriptedPolicy) setRefused(id ID, refused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse[id] = refused
}

// undecided is how many refusals the store has not been told about yet.
func (p *scriptedPolicy) undecided() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

func (p *scriptedPolicy) offer(e *entry, cost int64) bool {
	p.mu.Lock()
	if p.refuse[e.key.id] {
		p.pending = append(p.pending, e)
		p.mu.Unlock()
		return true // queued; the decision comes later
	}
	p.mu.Unlock()
	return p.policy.offer(e, cost)
}

// deliver tells the store about every refusal decided so far, as
// ristretto's goroutine does. The store's mutex must not be held.
func (p *scriptedPolicy) deliver() {
	p.mu.Lock()
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, e := range pending {
		p.onReject(e)
	}
}

func (p *scriptedPolicy) settle(e *entry) {
	p.deliver()
	p.policy.settle(e)
}

func (p *scriptedPolicy) wait() {
	p.deliver()
	p.policy.wait()
}

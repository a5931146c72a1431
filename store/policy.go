package store

import "fmt"

// Eviction policies, the values of Config.Policy.
const (
	// PolicyLRU keeps the most recently used chunks: every lookup, read and
	// write makes a chunk the newest, and the oldest is evicted first. No
	// chunk is refused admission while it fits the budget. The default:
	// prefix traffic rewards recency, and refusing single chunks breaks the
	// prefixes they belong to (docs/benchmarks.md, "Eviction policy").
	PolicyLRU = "lru"
	// PolicyTinyLFU is ristretto's TinyLFU admission with sampled-LFU
	// eviction: a new chunk is admitted only when the frequency sketch
	// rates it above a sampled victim.
	PolicyTinyLFU = "tinylfu"
)

// policy decides which chunks stay. It holds no bytes: it knows entries by
// their 64-bit hash and charges each its slot size against the budget.
//
// The store calls every method without holding its mutex; a policy calls
// onEvict and onReject (which take that mutex) without holding its own locks.
type policy interface {
	// offer asks the policy to admit e at cost bytes. It returns false when
	// the offer could not be made at all (the store then treats e as
	// rejected). The decision may come later, through the callbacks, which
	// set e.rejected or e.evicted.
	offer(e *entry, cost int64) bool
	// settle returns once the policy has decided about e.
	settle(e *entry)
	// wait returns once every offer and eviction so far has been decided
	// and its callbacks have run.
	wait()
	// touch records an access to the chunk with hash h (known or not).
	touch(h uint64)
	// forget drops h without a callback.
	forget(h uint64)
	// demote makes the chunk with hash h the next to evict, as far as the
	// policy keeps an order (PolicyLRU without namespace shares; a no-op
	// otherwise): a chunk promoted from the Lower tier, which holds it too.
	demote(h uint64)
	// reclaim evicts unpinned chunks other than keep (the entry that needs
	// the room; nil for none) worth at least cost bytes beyond what offers
	// asked for, and reports whether it evicted any. The store
	// calls it when the budget has no room although the policy counted
	// room as made: the chunks an offer chose may keep their slots a while
	// (a staged chunk until its writer stops, a chunk made from a blob
	// until the blob is freed), and a concurrent writer must not be
	// refused for that.
	reclaim(cost int64, keep *entry) bool
	// setShares replaces the namespace shares (by the store's namespace
	// number); an empty map is none: one budget shared by all. Only
	// PolicyLRU enforces them (the store refuses shares under another).
	setShares(m map[uint32]shareLimits)
	// close releases the policy's resources.
	close()
}

// newPolicy builds the policy cfg names, with a budget of cfg.MemoryLimit.
func newPolicy(cfg *Config, onEvict evictFunc, onReject func(*entry)) (policy, error) {
	switch cfg.Policy {
	case PolicyLRU:
		return newLRU(cfg.MemoryLimit, onEvict, onReject), nil
	case PolicyTinyLFU:
		return newTinyLFU(cfg.MemoryLimit, cfg.MemoryLimit/cfg.ExpectedChunkSize, onEvict, onReject)
	}
	return nil, fmt.Errorf("%w: unknown eviction policy %q (want %q or %q)", ErrInvalid, cfg.Policy, PolicyLRU, PolicyTinyLFU)
}

package store

import (
	"fmt"

	"github.com/dgraph-io/ristretto/v2"
)

// sketchCountersPerItem sizes TinyLFU's frequency sketch. ristretto halves
// its counters every NumCounters accesses, so fewer counters mean faster
// aging. Replaying the Mooncake trace (loadtest BenchmarkPolicyReplay) at 5 %
// and 10 % budgets gave hit ratios of 0.142/0.244 with 4 per item, 0.153/0.244
// with 2 and 0.149/0.241 with 1 (LRU: 0.155/0.260): prefix traffic rewards
// recency, so the sketch forgets fast.
const sketchCountersPerItem = 2

// tinyLFU is the PolicyTinyLFU policy: the ristretto cache decides which
// chunks stay. ristretto holds no bytes: its values are the store's entries,
// its costs their slot sizes. Its callbacks run on ristretto's goroutine and
// take the store's mutex, so the store never calls Set, Wait or Del while
// holding that mutex.
type tinyLFU struct {
	c *ristretto.Cache[uint64, *entry]
}

// newTinyLFU builds the cache. onEvict is told about each entry ristretto
// evicts; onReject about each entry it declines to admit.
func newTinyLFU(maxCost, expectedItems int64, onEvict evictFunc, onReject func(*entry)) (*tinyLFU, error) {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		NumCounters:        max(sketchCountersPerItem*expectedItems, 1024),
		MaxCost:            maxCost,
		BufferItems:        64,
		IgnoreInternalCost: true,
		// Keys are already 64-bit hashes of (namespace, id); the index resolves
		// the rare collision, and ShouldUpdate refuses to let one chunk's Set
		// overwrite another's, so a collision is reported as a rejection.
		KeyToHash:    func(k uint64) (uint64, uint64) { return k, 0 },
		ShouldUpdate: func(cur, prev *entry) bool { return cur == prev },
		OnEvict: func(it *ristretto.Item[*entry]) {
			if it.Value != nil {
				onEvict(it.Value, true) // ristretto has dropped it already
			}
		},
		OnReject: func(it *ristretto.Item[*entry]) {
			if it.Value != nil {
				onReject(it.Value)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create admission policy: %w", err)
	}
	return &tinyLFU{c: c}, nil
}

// offer queues e for admission with its cost without waiting for the
// decision; the callbacks set e.rejected or e.evicted if it is not admitted.
// It returns false when the offer could not be queued (ristretto's buffer
// stayed full). May block briefly.
func (p *tinyLFU) offer(e *entry, cost int64) bool {
	for i := 0; !p.c.Set(e.hash, e, cost); i++ {
		// The set buffer was full: let it drain and try again.
		p.c.Wait()
		if i == 3 {
			return false
		}
	}
	return true
}

// settle makes sure the policy has decided about e: if e is not (yet)
// admitted it waits for ristretto to process everything queued so far, after
// which the callbacks for e have run. Blocks only in that case.
func (p *tinyLFU) settle(e *entry) {
	if _, admitted := p.c.GetTTL(e.hash); !admitted {
		p.c.Wait()
	}
}

// wait blocks until ristretto has processed every offer and eviction queued
// so far (and run their callbacks).
func (p *tinyLFU) wait() { p.c.Wait() }

// touch records an access to the key for the frequency sketch. Never blocks.
func (p *tinyLFU) touch(h uint64) { p.c.Get(h) }

// forget removes the key from the policy. May block briefly on the set buffer.
func (p *tinyLFU) forget(h uint64) { p.c.Del(h) }

func (p *tinyLFU) demote(uint64) {}

// reclaim cannot choose victims: ristretto evicts only to admit a key. It
// waits for the offers and evictions queued so far, whose slots are then
// free, and reports true: the store tries its allocation again (a bounded
// number of times).
func (p *tinyLFU) reclaim(int64, *entry) bool {
	p.c.Wait()
	return true
}

// setShares does nothing: ristretto chooses its victims by itself, so
// the store refuses namespace shares under PolicyTinyLFU.
func (p *tinyLFU) setShares(map[uint32]shareLimits) {}

func (p *tinyLFU) close() { p.c.Close() }

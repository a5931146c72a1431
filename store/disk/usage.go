package disk

import "github.com/kvring/kvring/store"

// Usage returns the chunks and payload bytes the tier holds (on disk or
// queued), by namespace. It walks the index under the tier's mutex (about
// 20 ms a million chunks): for admin calls, not a data path.
func (t *Tier) Usage() map[string]store.LowerUsage {
	t.mu.Lock()
	defer t.mu.Unlock()
	byID := make([]store.LowerUsage, len(t.nsNames))
	for _, l := range t.idx {
		byID[l.ns].Chunks++
		byID[l.ns].Bytes += int64(l.size)
	}
	for k, rec := range t.pending {
		if _, ok := t.idx[k]; ok || rec.gone {
			continue
		}
		byID[rec.ns].Chunks++
		byID[rec.ns].Bytes += int64(rec.h.size)
	}
	out := make(map[string]store.LowerUsage)
	for i, u := range byID {
		if u.Chunks > 0 {
			out[t.nsNames[i]] = u
		}
	}
	return out
}

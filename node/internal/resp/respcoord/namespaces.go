package respcoord

import (
	"sync"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/resp"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// nsCache keeps the resp.Namespace of each registry record it was asked
// for, so a command on a known namespace builds none (a GET held here
// costs a few hundred nanoseconds; these were a tenth of its allocations).
// A record replaced in the registry (a namespace dropped and made again)
// is a new pointer, so its entry is rebuilt. Safe for concurrent use; the
// Namespaces it returns are shared and must not be changed.
type nsCache struct {
	mu sync.RWMutex
	m  map[string]nsCacheEntry
}

type nsCacheEntry struct {
	rec *kvringv1.NamespaceRecord
	ns  resp.Namespace
}

// nsCacheMax bounds the entries: past it the cache starts again.
const nsCacheMax = 4096

// of returns rec's Namespace.
func (c *nsCache) of(rec *kvringv1.NamespaceRecord) resp.Namespace {
	c.mu.RLock()
	e, ok := c.m[rec.GetName()]
	c.mu.RUnlock()
	if ok && e.rec == rec {
		return e.ns
	}
	ns := resp.Namespace{Ref: &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()},
		Store: namespace.StoreName(rec.GetName(), rec.GetFingerprint())}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= nsCacheMax {
		c.m = make(map[string]nsCacheEntry)
	}
	c.m[rec.GetName()] = nsCacheEntry{rec: rec, ns: ns}
	c.mu.Unlock()
	return ns
}

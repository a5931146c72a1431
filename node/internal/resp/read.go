package resp

import (
	"context"

	"github.com/kvring/kvring/store"
)

// readSink receives the value of key position i, in order: data, or nil
// for a miss (no member that may hold it does), or err when the key could
// not be read (a member that may hold it did not answer: never a miss).
// With release nil, data is only valid during the call; otherwise the sink
// owns data and must call release once it is done with it (at once after
// copying it, or when the writer has sent it: bulkOwned).
type readSink func(i int, data []byte, release func(), err error)

// let calls release, when there is one: a sink that is done with its data.
func let(release func()) {
	if release != nil {
		release()
	}
}

// owned is the release of data nothing else holds (the garbage collector
// frees it).
func owned() {}

// readKeys reads the values of raw keys and hands each to sink in key
// order, as soon as it is known, so a reply streams without holding every
// value: a chunk this node holds is read in place from shared memory
// (verified against its checksum); consecutive keys of one namespace that it
// does not hold are read in one cluster call (one round trip per owner).
// A key the cluster could not read is handed over with its error; the first
// error is returned too (for the caller's count).
func (c *conn) readKeys(ctx context.Context, raw [][]byte) (func(sink readSink) error, bool) {
	groups, ok := c.mapKeys(raw)
	if !ok {
		return nil, false
	}
	return func(sink readSink) error {
		if err := c.resolve(ctx, groups, false); err != nil {
			for i := range raw {
				sink(i, nil, nil, err)
			}
			return err
		}
		return c.streamKeys(ctx, groups, len(raw), sink)
	}, true
}

// streamKeys is readKeys after the namespaces are resolved.
func (c *conn) streamKeys(ctx context.Context, groups []*nsKeys, n int, sink readSink) error {
	// where maps a key position to its group and place in it.
	type where struct {
		g *nsKeys
		k keyRef
	}
	pos := make([]where, n)
	for _, g := range groups {
		for _, k := range g.keys {
			pos[k.at] = where{g, k}
		}
	}
	var firstErr error
	var run []keyRef
	var runNS *nsKeys
	flush := func() {
		if len(run) == 0 {
			return
		}
		g := runNS
		err := c.s.cfg.Cluster.Get(ctx, g.ns, justKeys(run), func(i int, data []byte, err error) error {
			k := run[i]
			if data == nil && err == nil && g.fallback != nil {
				data, err = c.readFallback(ctx, g, k.Key)
			}
			c.countRead(g, sink, k.at, data, owned, err)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			return nil
		})
		if err != nil && firstErr == nil {
			firstErr = err
		}
		run = run[:0]
	}
	for i := range n {
		w := pos[i]
		if !w.g.known {
			flush()
			c.countRead(nil, sink, i, nil, nil, nil)
			continue
		}
		if c.heldLocally(w.g.ns, w.k.Key) {
			flush() // the keys before it go first
			if c.readLocal(w.g.ns, w.k.ID, func(b []byte, release func()) { c.countRead(w.g, sink, i, b, release, nil) }) {
				continue
			}
		}
		if runNS != w.g {
			flush()
			runNS = w.g
		}
		run = append(run, w.k)
	}
	flush()
	return firstErr
}

// readFallback reads key k of group g in the default namespace, where a
// write put it when its own namespace could not be created
// (writeNamespace): nil when it is not there either.
func (c *conn) readFallback(ctx context.Context, g *nsKeys, k Key) (data []byte, err error) {
	fk := c.placed(k.InNamespace(g.fallback.Ref.GetName()))
	if c.readLocal(*g.fallback, fk.ID, func(b []byte, release func()) { data = append([]byte(nil), b...); let(release) }) {
		return data, nil
	}
	gerr := c.s.cfg.Cluster.Get(ctx, *g.fallback, []Key{fk}, func(_ int, b []byte, e error) error {
		data, err = b, e
		return nil
	})
	if err == nil {
		err = gerr
	}
	return data, err
}

// readLocal hands f the verified bytes of chunk id when this node's store holds
// it, and reports whether it did. A value under bigReply is read under a
// fault guard (a fault is "did not": the cluster is asked instead) and only
// valid during f (release nil); a larger one is handed over with the
// chunk's reference, which f must release (the writer sends it from shared
// memory, where a fault is a failed write, not a crash).
func (c *conn) readLocal(ns Namespace, id store.ID, f func(data []byte, release func())) bool {
	v, err := c.s.cfg.Store.Get(ns.Store, id)
	if err != nil {
		return false // evicted meanwhile, or failed its checksum: the cluster may have another copy
	}
	if len(v.Bytes()) >= bigReply {
		f(v.Bytes(), v.Release)
		return true
	}
	defer v.Release()
	return v.Read(func(b []byte) { f(b, nil) }) == nil
}

// getHeld writes the reply to a GET of key when this node's store holds
// it, and reports whether it did: readKeys for one key held here, without
// its grouping and bookkeeping, the common GET under a cluster-aware client
// or on a single node. Anything else (a namespace the token may not use or
// the node does not know, a key held elsewhere, evicted or failing its
// checksum meanwhile) is left to readKeys, which answers it.
func (c *conn) getHeld(ctx context.Context, key []byte) bool {
	name := c.namespaceOf(key)
	if !c.access.allows(name) {
		return false
	}
	ns, err := c.s.cfg.Cluster.Namespace(ctx, name, false)
	if err != nil {
		return false
	}
	if !c.readLocal(ns, c.s.cfg.KeyMap.ID(key), c.w.bulkOwned) {
		return false
	}
	c.s.m.read(true)
	c.s.ns.read(name, readHit)
	return true
}

// countRead counts a read of a key of group g as a hit or a miss (not a
// key that could not be read) and, per namespace, as a hit, a miss or an
// error, unless g is nil (a namespace the node does not know), and passes
// it on.
func (c *conn) countRead(g *nsKeys, sink readSink, i int, data []byte, release func(), err error) {
	if err == nil {
		c.s.m.read(data != nil)
	}
	if g != nil {
		c.s.ns.read(g.name, readResult(data != nil, err))
	}
	sink(i, data, release, err)
}

// readResult is the result of a key's read for nsMetrics.
func readResult(hit bool, err error) int {
	switch {
	case err != nil:
		return readError
	case hit:
		return readHit
	}
	return readMiss
}

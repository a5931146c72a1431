package resp

import (
	"context"
	"errors"
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// stored reports whether a result means the value is held now.
func stored(r *kvringv1.PutChunkResult) bool {
	s := r.GetStatus()
	return s == kvringv1.PutStatus_PUT_STATUS_STORED || s == kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD
}

// publish writes vals (one per key position) under the keys of groups, one two-phase write per
// namespace, and returns a result per key. A value the reader could not
// keep fails with its error; so does every value of a namespace that could
// not be registered. It writes no reply.
func (c *conn) publish(ctx context.Context, groups []*nsKeys, n int, vals []argValue) ([]*kvringv1.PutChunkResult, []error) {
	results := make([]*kvringv1.PutChunkResult, n)
	errs := make([]error, n)
	if len(vals) != n {
		for i := range errs {
			errs[i] = fmt.Errorf("BUG: %d values for %d keys", len(vals), n)
		}
		return results, errs
	}
	first := n // the first key position not stored
	for _, g := range groups {
		resolved := c.publishGroup(ctx, g, vals, results, errs)
		first = c.countWrites(g, resolved, results, errs, first)
	}
	return results, errs
}

// publishGroup is publish of the keys of one namespace: their results and
// errors are set in results and errs, by key position. It reports whether
// the namespace was found or created (g.name names it then).
func (c *conn) publishGroup(ctx context.Context, g *nsKeys, vals []argValue, results []*kvringv1.PutChunkResult, errs []error) bool {
	ns, err := c.writeNamespace(ctx, g)
	if err != nil {
		for _, k := range g.keys {
			errs[k.at] = err
		}
		return false
	}
	var keys []Key
	var blobs []*store.Blob
	var at []int
	first := map[Key]int{} // a key named twice is written once, with its first value
	var dups []keyRef
	for _, k := range g.keys {
		if v := vals[k.at]; v.err != nil {
			results[k.at], errs[k.at] = c.skipped(k.Key, v)
			continue
		}
		if _, seen := first[k.Key]; seen {
			dups = append(dups, k)
			continue
		}
		first[k.Key] = k.at
		keys, blobs, at = append(keys, k.Key), append(blobs, vals[k.at].value), append(at, k.at)
	}
	if len(keys) == 0 {
		return true
	}
	res, err := c.s.cfg.Cluster.Publish(ctx, ns, keys, blobs)
	if err == nil && len(res) != len(keys) {
		err = fmt.Errorf("BUG: %d results for %d values", len(res), len(keys))
	}
	for i, k := range at {
		switch sum, summed := blobs[i].Sum(); {
		case err != nil:
			errs[k] = err
		case summed:
			results[k], errs[k] = checkHeld(keys[i], res[i], sum)
		default:
			results[k] = res[i]
		}
	}
	for _, d := range dups {
		results[d.at], errs[d.at] = results[first[d.Key]], errs[first[d.Key]]
	}
	return true
}

// countWrites counts the keys of g by result in their namespace when it
// was resolved (a namespace that could not be created is not counted:
// its name is any client's), and returns the first key position not
// stored, given the first of the groups before (first): the namespace of
// that key names the command's refusal (conn.refusedNS).
func (c *conn) countWrites(g *nsKeys, resolved bool, results []*kvringv1.PutChunkResult, errs []error, first int) int {
	var n [nWriteResults]int
	for _, k := range g.keys {
		r := writeStored
		switch {
		case errs[k.at] != nil || !stored(results[k.at]):
			r = writeRefused
			if k.at < first {
				first, c.refusedNS = k.at, g.name
			}
		case results[k.at].GetStatus() == alreadyHeld:
			r = writeHeld
		}
		n[r]++
	}
	if resolved {
		for r, count := range n {
			c.s.ns.write(g.name, r, count)
		}
	}
	return first
}

// writeNamespace returns the namespace the keys of g are written to: their
// own, created when it does not exist, or, when the node holds as many
// namespaces as it may, the default namespace (the keys of g are moved
// there; reads look for them there too: fallbackRead). A write never fails
// because a key shape makes too many namespaces; a counter and a WARN
// line naming one key (at most one a minute) show it.
func (c *conn) writeNamespace(ctx context.Context, g *nsKeys) (Namespace, error) {
	ns, err := c.s.cfg.Cluster.Namespace(ctx, g.name, true)
	def := c.s.cfg.KeyMap.DefaultNamespace()
	if !errors.Is(err, ErrNamespaceLimit) || g.name == def {
		return ns, err
	}
	c.s.m.fallback(len(g.keys))
	if ok, n := c.s.warned.ok(warnKey{def, "namespace_fallback"}, c.s.cfg.Now()); ok {
		c.s.log.Warn("Redis-protocol keys go to the default namespace: their own cannot be created", "namespace", g.name,
			"default", def, "example_key", clip([]byte(g.keys[0].Name)), "err", err, "not_logged_since_last", n)
	}
	for i, k := range g.keys {
		g.keys[i].Key = c.placed(k.InNamespace(def))
	}
	g.name = def
	return c.s.cfg.Cluster.Namespace(ctx, def, true)
}

// skipped is the result of a value the reader did not keep: its error, or,
// for a value skipped because its key was stored already, ALREADY_HELD when
// the key still is with the same bytes (errGoneMeanwhile when it was
// evicted since, errOtherBytes when it holds other bytes).
func (c *conn) skipped(k Key, v argValue) (*kvringv1.PutChunkResult, error) {
	if !errors.Is(v.err, errKept) {
		return nil, v.err
	}
	sum, kept := c.s.cfg.Cluster.Kept(k)
	switch {
	case !kept:
		return nil, errGoneMeanwhile
	case sum != 0 && sum != v.sum:
		return nil, otherBytes(k, sum, v.sum)
	}
	return &kvringv1.PutChunkResult{Status: kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD}, nil
}

// otherBytes is the error of a SET of key k whose value (CRC-32C sent)
// differs from the bytes k holds (held): values are immutable.
func otherBytes(k Key, held, sent uint32) error {
	return fmt.Errorf("%w: key '%s' holds other bytes (CRC-32C %08x, this value's %08x): values are immutable, DEL the key first to write new bytes",
		errOtherBytes, clip([]byte(k.Name)), held, sent)
}

// checkHeld turns an ALREADY_HELD result whose holder reported other bytes
// than the value's (sum) into the error of a SET of other bytes.
func checkHeld(k Key, r *kvringv1.PutChunkResult, sum uint32) (*kvringv1.PutChunkResult, error) {
	if r.GetStatus() == alreadyHeld && r.GetHeldCrc32C() != 0 && r.GetHeldCrc32C() != sum {
		return nil, otherBytes(k, r.GetHeldCrc32C(), sum)
	}
	return r, nil
}

// failWrite writes the error reply of a value that was not stored: its
// reader or call error, or its result.
func (c *conn) failWrite(r *kvringv1.PutChunkResult, err error) {
	if err != nil {
		c.failErr(err)
		return
	}
	msg, reason := resultReply(r)
	c.fail(reason, msg)
}

package resp

import (
	"bytes"
	"context"
	"errors"
)

// keyRef is one key of a command, mapped.
type keyRef struct {
	Key
	at int // its position among the command's keys
}

// nsKeys are the keys of a command that share a namespace, in command order.
type nsKeys struct {
	name string
	ns   Namespace
	keys []keyRef
	// known is false when the namespace is not registered (a read finds
	// nothing in it).
	known bool
	// fallback, for a read, is the default namespace when it exists and
	// is not the group's own: a write may have put keys of the group there
	// (writeNamespace), so a key missing from its own is looked for there.
	fallback *Namespace
}

// mapKeys maps raw keys and groups them by namespace (in order of first
// appearance). It writes a NOPERM reply and returns false when the
// connection's token does not allow one of the namespaces.
func (c *conn) mapKeys(raw [][]byte) ([]*nsKeys, bool) {
	var groups []*nsKeys
	byName := map[string]*nsKeys{}
	for i, k := range raw {
		m := c.mapKey(k)
		if c.refusedNS == "" {
			c.refusedNS = m.Namespace
		}
		g := byName[m.Namespace]
		if g == nil {
			if !c.access.allows(m.Namespace) {
				c.refusedNS = m.Namespace
				c.fail("noperm", errorf(prefixNoPerm, "this token may not use namespace %q (key '%s')", m.Namespace, clip(k)))
				return nil, false
			}
			g = &nsKeys{name: m.Namespace}
			byName[m.Namespace] = g
			groups = append(groups, g)
		}
		g.keys = append(g.keys, keyRef{Key: m, at: i})
	}
	return groups, true
}

// mapKey maps key (KeyMap.Map); in Redis Cluster mode it is placed by its
// PlaceSlot.
func (c *conn) mapKey(key []byte) Key {
	return c.placed(c.s.cfg.KeyMap.Map(key))
}

// placed is k with its Place for Redis Cluster mode (Server.place).
func (c *conn) placed(k Key) Key { return c.s.place(k) }

// namespaceOf is KeyMap.Namespace(key), remembering the last namespace
// fields' answer: a connection's keys mostly share one (a model's).
func (c *conn) namespaceOf(key []byte) string {
	var buf [256]byte
	f := c.s.cfg.KeyMap.appendNSFields(buf[:0], key)
	switch {
	case len(f) == 0:
		return c.s.cfg.KeyMap.DefaultNamespace()
	case c.lastNS != "" && bytes.Equal(f, c.lastPrefix):
		return c.lastNS
	}
	name := c.s.cfg.KeyMap.name(f)
	if len(f) <= 256 {
		c.lastPrefix, c.lastNS = append(c.lastPrefix[:0], f...), name
	}
	return name
}

// resolve looks the groups' namespaces up; create registers unknown ones
// (writes). A read of an unknown namespace leaves known false, unless the
// default namespace exists: then the group's keys are read there
// (writeNamespace may have put them there), and a read of a known namespace
// looks there for what its own lacks (nsKeys.fallback).
func (c *conn) resolve(ctx context.Context, groups []*nsKeys, create bool) error {
	var def *Namespace
	if !create {
		if ns, ok := c.s.cfg.Cluster.Known(c.s.cfg.KeyMap.DefaultNamespace()); ok {
			def = &ns
		}
	}
	for _, g := range groups {
		ns, err := c.s.cfg.Cluster.Namespace(ctx, g.name, create)
		switch {
		case errors.Is(err, ErrNoNamespace) && !create && def != nil:
			g.moveTo(c, *def)
			continue
		case errors.Is(err, ErrNoNamespace) && !create:
			continue
		case err != nil:
			return err
		}
		g.ns, g.known = ns, true
		if def != nil && g.name != def.Ref.GetName() {
			g.fallback = def
		}
	}
	return nil
}

// moveTo makes g a group of namespace ns, its keys placed there.
func (g *nsKeys) moveTo(c *conn, ns Namespace) {
	g.name, g.ns, g.known = ns.Ref.GetName(), ns, true
	for i, k := range g.keys {
		g.keys[i].Key = c.placed(k.InNamespace(g.name))
	}
}

// justKeys returns the Keys of refs.
func justKeys(refs []keyRef) []Key {
	ks := make([]Key, len(refs))
	for i, r := range refs {
		ks[i] = r.Key
	}
	return ks
}

// heldLocally reports whether this node's store holds k sealed.
func (c *conn) heldLocally(ns Namespace, k Key) bool {
	return c.s.cfg.Store.Contains(ns.Store, k.ID)
}

// groupHeldLocally reports whether this node's store holds k and the
// siblings it needs (KeyMap.Needs) sealed.
func (c *conn) groupHeldLocally(ns Namespace, k Key) bool {
	if !c.heldLocally(ns, k) {
		return false
	}
	for _, sib := range c.s.cfg.KeyMap.Needs([]byte(k.Name)) {
		if !c.s.cfg.Store.Contains(ns.Store, c.s.cfg.KeyMap.ID(sib)) {
			return false
		}
	}
	return true
}

// held reports per key of groups whether a GET can return it now, and the
// siblings it needs too (KeyMap.Needs): this node's store first, then the cluster for the rest, one
// call per namespace, then the default namespace for what a group's own lacks
// (nsKeys.fallback). The result is indexed by key position. A key that may
// be held by a member that did not answer makes it an error (wrapping
// transfer.ErrUnavailable): never a 0 for what may exist. With an EXISTS
// lease (Config.ExistsLease), keys are asked through the cluster, whose
// holders pin what they report held for that long.
func (c *conn) held(ctx context.Context, groups []*nsKeys, n int) ([]bool, error) {
	out := make([]bool, n)
	lease := c.s.cfg.ExistsLease
	for _, g := range groups {
		if !g.known {
			continue
		}
		var rest []keyRef
		for _, k := range g.keys {
			if lease <= 0 && c.groupHeldLocally(g.ns, k.Key) {
				out[k.at] = true
			} else {
				rest = append(rest, k)
			}
		}
		if len(rest) == 0 {
			continue
		}
		h, err := c.s.cfg.Cluster.Held(ctx, g.ns, c.probes(rest, ""), lease)
		if err != nil {
			return nil, err
		}
		var missing []keyRef
		for i, k := range rest {
			out[k.at] = h[i]
			if !h[i] && g.fallback != nil {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			continue
		}
		h, err = c.s.cfg.Cluster.Held(ctx, *g.fallback, c.probes(missing, g.fallback.Ref.GetName()), lease)
		if err != nil {
			return nil, err
		}
		for i, k := range missing {
			out[k.at] = h[i]
		}
	}
	return out, nil
}

// probes are the Probes of refs, each with the siblings it needs
// (KeyMap.Needs): moved to
// namespace ns unless it is "".
func (c *conn) probes(refs []keyRef, ns string) []Probe {
	out := make([]Probe, len(refs))
	for i, r := range refs {
		k := r.Key
		if ns != "" {
			k = c.placed(k.InNamespace(ns))
		}
		out[i].Key = k
		for _, sib := range c.s.cfg.KeyMap.Needs([]byte(k.Name)) {
			sk := c.mapKey(sib)
			if ns != "" || sk.Namespace != k.Namespace {
				sk = c.placed(sk.InNamespace(k.Namespace))
			}
			out[i].Pin = append(out[i].Pin, sk)
		}
	}
	return out
}

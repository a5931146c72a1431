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
}

// mapKeys maps raw keys and groups them by namespace (in order of first
// appearance). It writes a NOPERM reply and returns false when the
// connection's token does not allow one of the namespaces.
func (c *conn) mapKeys(raw [][]byte) ([]*nsKeys, bool) {
	var groups []*nsKeys
	byName := map[string]*nsKeys{}
	for i, k := range raw {
		m := c.mapKey(k)
		g := byName[m.Namespace]
		if g == nil {
			if !c.access.allows(m.Namespace) {
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

// placed is k with its Place for Redis Cluster mode, where placement
// depends on the namespace (Cluster.SlotPlace); k itself outside it.
func (c *conn) placed(k Key) Key {
	if c.s.cfg.ClusterMode {
		k.Place = c.s.cfg.Cluster.SlotPlace(k.Namespace, k.PlaceSlot)
	}
	return k
}

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
// (writes). A read of an unknown namespace leaves known false.
func (c *conn) resolve(ctx context.Context, groups []*nsKeys, create bool) error {
	for _, g := range groups {
		ns, err := c.s.cfg.Cluster.Namespace(ctx, g.name, create)
		switch {
		case errors.Is(err, ErrNoNamespace) && !create:
			continue
		case err != nil:
			return err
		}
		g.ns, g.known = ns, true
	}
	return nil
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

// held reports per key of groups whether a GET can return it now: this
// node's store first, then the cluster for the rest, one call per
// namespace. The result is indexed by key position.
func (c *conn) held(ctx context.Context, groups []*nsKeys, n int) ([]bool, error) {
	out := make([]bool, n)
	for _, g := range groups {
		if !g.known {
			continue
		}
		var rest []keyRef
		for _, k := range g.keys {
			if c.heldLocally(g.ns, k.Key) {
				out[k.at] = true
			} else {
				rest = append(rest, k)
			}
		}
		if len(rest) == 0 {
			continue
		}
		h, err := c.s.cfg.Cluster.Held(ctx, g.ns, justKeys(rest))
		if err != nil {
			return nil, err
		}
		for i, k := range rest {
			out[k.at] = h[i]
		}
	}
	return out, nil
}

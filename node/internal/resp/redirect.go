package resp

import (
	"net"
	"slices"
	"strconv"
)

// redirect returns the -MOVED reply of a command whose key this node does
// not own in Redis Cluster mode, or "" to serve it here: outside cluster
// mode, for commands without keys, when the slot has no owner or this node
// is its primary owner, while the ring settles after a change (nodes' views
// of the slots may differ then, and a client must not be sent back and
// forth: this node coordinates the key itself), and for reads by a
// READONLY client when this node is one of the slot's owners. Multi-key commands are decided by their
// first key (kvring serves keys of other slots in the same command, where
// Redis would answer CROSSSLOT).
func (c *conn) redirect(cmd command, req *request) string {
	if !c.s.cfg.ClusterMode || cmd.firstKey <= 0 || len(req.args) <= cmd.firstKey {
		return ""
	}
	return c.redirectKey(cmd, req.args[cmd.firstKey])
}

// redirectKey is redirect's decision for a command's first key.
func (c *conn) redirectKey(cmd command, key []byte) string {
	t := c.s.cfg.Cluster.Slots()
	slot := Slot(key)
	owners := t.owners(slot)
	switch {
	case len(owners) == 0 || owners[0] == t.Self || t.Unsettled:
		return ""
	case c.readonly && slices.Contains(cmd.flags, "readonly") && slices.Contains(owners, t.Self):
		return ""
	}
	n := t.Nodes[owners[0]]
	return "MOVED " + strconv.Itoa(int(slot)) + " " + net.JoinHostPort(n.Host, strconv.Itoa(n.Port))
}

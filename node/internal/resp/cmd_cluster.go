package resp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// cmdCluster answers CLUSTER SLOTS, SHARDS, NODES, INFO, KEYSLOT and MYID
// from the slot table (Redis Cluster mode; outside it, Redis's error).
func cmdCluster(_ context.Context, c *conn, req *request) {
	sub := lower(req.args[1])
	if sub == "keyslot" && len(req.args) == 3 {
		c.w.int(int64(Slot(req.args[2])))
		return
	}
	if !c.s.cfg.ClusterMode {
		c.fail("cluster_disabled", errorf(prefixErr, "This instance has cluster support disabled"))
		return
	}
	t := c.s.cfg.Cluster.Slots()
	switch {
	case sub == "slots" && len(req.args) == 2:
		c.clusterSlots(t)
	case sub == "shards" && len(req.args) == 2:
		c.clusterShards(t)
	case sub == "nodes" && len(req.args) == 2:
		c.w.bulkString(clusterNodes(t))
	case sub == "info" && len(req.args) == 2:
		c.w.bulkString(clusterInfo(t))
	case sub == "myid" && len(req.args) == 2:
		if t.Self < 0 {
			c.fail("cluster", errorf(prefixErr, "this node is not in the ring yet"))
			return
		}
		c.w.bulkString(t.Nodes[t.Self].RedisID())
	default:
		c.fail("syntax", errorf(prefixErr, "unknown subcommand or wrong number of arguments for '%s'. Try CLUSTER HELP.", clip(req.args[1])))
	}
}

// clusterSlots writes CLUSTER SLOTS: per range, start, end and the owners
// (host, port, id), primary first.
func (c *conn) clusterSlots(t *SlotTable) {
	c.w.array(len(t.Ranges))
	for _, r := range t.Ranges {
		c.w.array(2 + len(r.Owners))
		c.w.int(int64(r.Start))
		c.w.int(int64(r.End))
		for _, o := range r.Owners {
			n := t.Nodes[o]
			c.w.array(3)
			c.w.bulkString(n.Host)
			c.w.int(int64(n.Port))
			c.w.bulkString(n.RedisID())
		}
	}
}

// clusterShards writes CLUSTER SHARDS: one shard per node, with the slots
// it is the primary owner of; the nodes that are the other owners of those
// slots are not listed as its replicas (each owns other slots itself).
func (c *conn) clusterShards(t *SlotTable) {
	by := t.byNode()
	c.w.array(len(t.Nodes))
	for i, n := range t.Nodes {
		c.w.mapHeader(2)
		c.w.bulkString("slots")
		c.w.array(2 * len(by[i]))
		for _, r := range by[i] {
			c.w.int(int64(r.Start))
			c.w.int(int64(r.End))
		}
		c.w.bulkString("nodes")
		c.w.array(1)
		c.w.mapHeader(7)
		for _, kv := range [][2]string{{"id", n.RedisID()}, {"ip", n.Host}, {"endpoint", n.Host}, {"role", "master"}, {"health", "online"}} {
			c.w.bulkString(kv[0])
			c.w.bulkString(kv[1])
		}
		c.w.bulkString("port")
		c.w.int(int64(n.Port))
		c.w.bulkString("replication-offset")
		c.w.int(0)
	}
}

// clusterNodes is CLUSTER NODES: a line per node, every node a master of
// the slots it is the primary owner of.
func clusterNodes(t *SlotTable) string {
	by := t.byNode()
	var b strings.Builder
	for i, n := range t.Nodes {
		flags := "master"
		if i == t.Self {
			flags = "myself,master"
		}
		fmt.Fprintf(&b, "%s %s:%d@%d %s - 0 0 %d connected", n.RedisID(), n.Host, n.Port, n.Port, flags, t.Epoch)
		for _, r := range by[i] {
			if r.Start == r.End {
				fmt.Fprintf(&b, " %d", r.Start)
			} else {
				fmt.Fprintf(&b, " %d-%d", r.Start, r.End)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// clusterInfo is CLUSTER INFO.
func clusterInfo(t *SlotTable) string {
	assigned := 0
	for _, r := range t.Ranges {
		if len(r.Owners) > 0 {
			assigned += int(r.End-r.Start) + 1
		}
	}
	state := "ok"
	if assigned < SlotCount {
		state = "fail"
	}
	var b strings.Builder
	for _, kv := range [][2]string{
		{"cluster_enabled", "1"}, {"cluster_state", state}, {"cluster_slots_assigned", strconv.Itoa(assigned)},
		{"cluster_slots_ok", strconv.Itoa(assigned)}, {"cluster_slots_pfail", "0"}, {"cluster_slots_fail", "0"},
		{"cluster_known_nodes", strconv.Itoa(len(t.Nodes))}, {"cluster_size", strconv.Itoa(len(t.Nodes))},
		{"cluster_current_epoch", strconv.FormatUint(t.Epoch, 10)}, {"cluster_my_epoch", strconv.FormatUint(t.Epoch, 10)},
	} {
		b.WriteString(kv[0] + ":" + kv[1] + "\r\n")
	}
	return b.String()
}

// cmdReadonly answers READONLY and READWRITE: whether this connection's
// reads may be served by a node that is one of the slot's other owners.
func cmdReadonly(_ context.Context, c *conn, req *request) {
	c.readonly = req.name == "readonly"
	c.w.ok()
}

// cmdAsking answers ASKING: kvring never answers -ASK (a slot moves whole,
// with the ring), so it changes nothing.
func cmdAsking(_ context.Context, c *conn, _ *request) { c.w.ok() }

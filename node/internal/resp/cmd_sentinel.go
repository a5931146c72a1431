package resp

import (
	"context"
	"net"
	"strconv"
)

// A kvring node answers SENTINEL as a Redis Sentinel that monitors one
// master, Config.SentinelMaster: clients that find their Redis through
// Sentinel (LMCache's redis-sentinel://, redis-py's Sentinel) are given a
// live node to use. Every node coordinates every key, so the master a node
// names is itself; the replicas are the other live members, and the other
// sentinels are those members too (each serves SENTINEL on its Redis-protocol
// port). When a client's node dies, the next sentinel it asks is a live node,
// which names itself. The members come from the slot table (Cluster.Slots):
// the ring's members that serve the port and are not draining, with the
// addresses they gossip.

// sentinelSubs are the SENTINEL subcommands served, with their arity as
// Redis 7.2 checks it (the argument count with SENTINEL and the
// subcommand).
var sentinelSubs = map[string]int{
	"masters": 2, "master": 3, "get-master-addr-by-name": 3, "slaves": 3, "replicas": 3,
	"sentinels": 3, "myid": 2, "ckquorum": 3, "help": 2,
}

// sentinelHelp is SENTINEL HELP: Redis's lines for the subcommands served.
var sentinelHelp = []string{
	"SENTINEL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CKQUORUM <master-name>",
	"    Check if the current Sentinel configuration is able to reach the quorum",
	"    needed to failover a master and the majority needed to authorize the",
	"    failover.",
	"GET-MASTER-ADDR-BY-NAME <master-name>",
	"    Return the ip and port number of the master with that name.",
	"MASTER <master-name>",
	"    Show the state and info of the specified master.",
	"MASTERS",
	"    Show a list of monitored masters and their state.",
	"MYID",
	"    Return the ID of the Sentinel instance.",
	"REPLICAS <master-name>",
	"    Show a list of replicas for this master and their state.",
	"SENTINELS <master-name>",
	"    Show a list of Sentinel instances for this master and their state.",
	"HELP",
	"    Prints this help.",
}

// Fixed figures of the sentinel replies: Redis Sentinel's defaults, which
// describe no kvring setting (kvring fails nothing over: every node serves
// every key).
const (
	sentinelDownAfterMs     = "30000"
	sentinelFailoverTimeout = "180000"
)

// cmdSentinel answers SENTINEL MASTERS, MASTER, GET-MASTER-ADDR-BY-NAME,
// SLAVES/REPLICAS, SENTINELS, MYID, CKQUORUM and HELP, with Redis 7.2
// Sentinel's replies and errors.
func cmdSentinel(_ context.Context, c *conn, req *request) {
	sub, ok := c.subcommand(req, "sentinel", sentinelSubs)
	if !ok {
		return
	}
	if sub == "help" {
		c.help(sentinelHelp)
		return
	}
	v := c.sentinelView()
	if sub == "myid" {
		c.w.bulkString(v.myID)
		return
	}
	if sub == "masters" {
		c.w.array(1)
		c.writeFields(v.masterFields())
		return
	}
	if string(req.args[2]) != v.name {
		if sub == "get-master-addr-by-name" {
			c.w.nullArray()
			return
		}
		c.fail("sentinel", errorf(prefixErr, "No such master with that name"))
		return
	}
	switch sub {
	case "master":
		c.writeFields(v.masterFields())
	case "get-master-addr-by-name":
		c.w.strings(v.master.Host, strconv.Itoa(v.master.Port))
	case "slaves", "replicas":
		c.w.array(len(v.slaves))
		for _, n := range v.slaves {
			c.writeFields(v.slaveFields(n))
		}
	case "sentinels":
		c.w.array(len(v.sentinels))
		for _, n := range v.sentinels {
			c.writeFields(sentinelFields(n))
		}
	case "ckquorum":
		c.ckquorum(v)
	}
}

// ckquorum answers SENTINEL CKQUORUM as Redis does for a quorum that the
// live sentinels reach (a majority of them: sentinelView.quorum).
func (c *conn) ckquorum(v sentinelView) {
	if v.down {
		c.fail("sentinel", "NOQUORUM no member serves the Redis protocol now")
		return
	}
	usable := len(v.sentinels) + 1
	c.w.simple("OK " + strconv.Itoa(usable) + " usable Sentinels. Quorum and failover authorization can be reached")
}

// writeFields writes a sentinel's description of an instance: a flat array
// of field names and values in RESP2, a map in RESP3, as Redis does.
func (c *conn) writeFields(kv []string) {
	c.w.mapHeader(len(kv) / 2)
	for _, s := range kv {
		c.w.bulkString(s)
	}
}

// sentinelView is what a node's sentinel reports: the master it names, the
// replicas and the other sentinels.
type sentinelView struct {
	name   string // the master's name (Config.SentinelMaster)
	myID   string // this sentinel's id: 40 hex digits
	epoch  uint64 // the ring epoch, reported as config-epoch
	master SlotNode
	// down: no member serves the port (no ring yet); the master named is
	// this connection's own address, flagged down, so clients ask
	// another sentinel.
	down      bool
	slaves    []SlotNode
	sentinels []SlotNode
}

// sentinelView is this node's view through the current slot table.
func (c *conn) sentinelView() sentinelView {
	return newSentinelView(c.s.cfg.SentinelMaster, c.s.cfg.NodeID, c.s.cfg.Cluster.Slots(), c.nc.LocalAddr())
}

// newSentinelView reports master name over table t, for the node selfID:
// the master is the node itself when it is in t (a ring member that serves
// the port and is not draining), else the first node of t (this node is
// draining or not a ring member yet: clients should use a node that is);
// the replicas are the other nodes of t, the other sentinels every node of
// t but this one. With no node in t, the master is local (the address the
// client reached), flagged down. Pure.
func newSentinelView(name, selfID string, t *SlotTable, local net.Addr) sentinelView {
	v := sentinelView{name: name, myID: SlotNode{ID: selfID}.RedisID(), epoch: t.Epoch}
	m := t.Self
	switch {
	case len(t.Nodes) == 0:
		v.down = true
		v.master = addrNode(selfID, local)
		return v
	case m < 0:
		m = 0
	}
	v.master = t.Nodes[m]
	for i, n := range t.Nodes {
		if i != m {
			v.slaves = append(v.slaves, n)
		}
		if i != t.Self {
			v.sentinels = append(v.sentinels, n)
		}
	}
	return v
}

// addrNode is the node id at address a (port 0 when a has none, as a unix
// socket's).
func addrNode(id string, a net.Addr) SlotNode {
	n := SlotNode{ID: id}
	if a == nil {
		return n
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		n.Host = a.String()
		return n
	}
	n.Host = host
	n.Port, _ = strconv.Atoi(port)
	return n
}

// quorum is a majority of the sentinels (every live member is one).
func (v sentinelView) quorum() int { return (len(v.sentinels)+1)/2 + 1 }

// instanceFields are the fields every instance of a sentinel reply starts
// with, as Redis's addReplySentinelRedisInstance writes them.
func instanceFields(name string, n SlotNode, flags string) []string {
	return []string{"name", name, "ip", n.Host, "port", strconv.Itoa(n.Port), "runid", n.RedisID(), "flags", flags,
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0", "last-ok-ping-reply", "0",
		"last-ping-reply", "0"}
}

// masterFields describes the master, as SENTINEL MASTER does: flags
// "master" (with "s_down,o_down" when no member serves the port, which
// clients check before they use it), num-slaves and num-other-sentinels.
func (v sentinelView) masterFields() []string {
	flags := "master"
	if v.down {
		flags = "master,s_down,o_down"
	}
	kv := instanceFields(v.name, v.master, flags)
	if v.down {
		kv = append(kv, "s-down-time", "0", "o-down-time", "0")
	}
	return append(kv, "down-after-milliseconds", sentinelDownAfterMs, "info-refresh", "0",
		"role-reported", "master", "role-reported-time", "0",
		"config-epoch", strconv.FormatUint(v.epoch, 10), "num-slaves", strconv.Itoa(len(v.slaves)),
		"num-other-sentinels", strconv.Itoa(len(v.sentinels)), "quorum", strconv.Itoa(v.quorum()),
		"failover-timeout", sentinelFailoverTimeout, "parallel-syncs", "1")
}

// slaveFields describes replica n, as SENTINEL REPLICAS does: a replica
// whose link to the master is up and has nothing to catch up (a kvring
// member serves every key itself).
func (v sentinelView) slaveFields(n SlotNode) []string {
	addr := net.JoinHostPort(n.Host, strconv.Itoa(n.Port))
	return append(instanceFields(addr, n, "slave"), "down-after-milliseconds", sentinelDownAfterMs,
		"info-refresh", "0", "role-reported", "slave", "role-reported-time", "0",
		"master-link-down-time", "0", "master-link-status", "ok", "master-host", v.master.Host,
		"master-port", strconv.Itoa(v.master.Port), "slave-priority", "100", "slave-repl-offset", "0",
		"replica-announced", "1")
}

// sentinelFields describes sentinel n, as SENTINEL SENTINELS does.
func sentinelFields(n SlotNode) []string {
	return append(instanceFields(n.RedisID(), n, "sentinel"), "down-after-milliseconds", sentinelDownAfterMs,
		"last-hello-message", "0", "voted-leader", "?", "voted-leader-epoch", "0")
}

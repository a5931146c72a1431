package resp

import (
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fields turns a sentinel instance reply (a flat array in RESP2, a map in
// RESP3) into its field names, in order where the reply has one, and a map.
func fields(t *testing.T, v any) ([]string, map[string]string) {
	t.Helper()
	m := map[string]string{}
	var names []string
	switch x := v.(type) {
	case []any:
		if len(x)%2 != 0 {
			t.Fatalf("an instance of %d elements, want field/value pairs: %v", len(x), x)
		}
		for i := 0; i < len(x); i += 2 {
			k, kok := x[i].(string)
			val, vok := x[i+1].(string)
			if !kok || !vok {
				t.Fatalf("field %d is %T/%T, want bulk strings (Redis sends numbers as strings too)", i/2, x[i], x[i+1])
			}
			names, m[k] = append(names, k), val
		}
	case map[any]any:
		for k, val := range x {
			ks, vs := k.(string), val.(string)
			m[ks] = vs
		}
	default:
		t.Fatalf("an instance is a %T, want an array or a map: %v", v, v)
	}
	return names, m
}

// Redis 7.2 Sentinel's fields, in its order (TestSentinelAndClientMatchARealRedis
// compares them with Debian's redis-server --sentinel where it is installed).
var (
	masterOrder = []string{"name", "ip", "port", "runid", "flags", "link-pending-commands", "link-refcount",
		"last-ping-sent", "last-ok-ping-reply", "last-ping-reply", "down-after-milliseconds", "info-refresh",
		"role-reported", "role-reported-time", "config-epoch", "num-slaves", "num-other-sentinels", "quorum",
		"failover-timeout", "parallel-syncs"}
	slaveOrder = []string{"name", "ip", "port", "runid", "flags", "link-pending-commands", "link-refcount",
		"last-ping-sent", "last-ok-ping-reply", "last-ping-reply", "down-after-milliseconds", "info-refresh",
		"role-reported", "role-reported-time", "master-link-down-time", "master-link-status", "master-host",
		"master-port", "slave-priority", "slave-repl-offset", "replica-announced"}
	sentinelOrder = []string{"name", "ip", "port", "runid", "flags", "link-pending-commands", "link-refcount",
		"last-ping-sent", "last-ok-ping-reply", "last-ping-reply", "down-after-milliseconds",
		"last-hello-message", "voted-leader", "voted-leader-epoch"}
)

// TestSentinelNamesThisNodeTheMaster: SENTINEL answers as a Redis Sentinel
// monitoring one master, this node (the fake table's 127.0.0.1:1), with
// the other member as replica and sentinel, in Redis's fields and order,
// as flat arrays in RESP2 and maps in RESP3. redis-py's checks pass: flags
// "master" without s_down/o_down, role-reported master.
func TestSentinelNamesThisNodeTheMaster(t *testing.T) {
	s, _ := testServer(t, nil)
	ctx := context.Background()
	c := client(t, s, 2)
	masters, err := c.Do(ctx, "SENTINEL", "MASTERS").Slice()
	if err != nil || len(masters) != 1 {
		t.Fatalf("SENTINEL MASTERS = %v, %v; want one master", masters, err)
	}
	order, m := fields(t, masters[0])
	if !slices.Equal(order, masterOrder) {
		t.Fatalf("SENTINEL MASTERS fields\n%v, want Redis's\n%v", order, masterOrder)
	}
	want := map[string]string{"name": "kvring", "ip": "127.0.0.1", "port": "1", "flags": "master", "role-reported": "master",
		"num-slaves": "1", "num-other-sentinels": "1", "quorum": "2", "config-epoch": "7", "runid": SlotNode{ID: "self"}.RedisID()}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("SENTINEL MASTERS %s = %q, want %q", k, m[k], v)
		}
	}
	one, err := c.Do(ctx, "SENTINEL", "MASTER", "kvring").Result()
	if _, m1 := fields(t, one); err != nil || fmt.Sprint(m1) != fmt.Sprint(m) {
		t.Fatalf("SENTINEL MASTER kvring = %v, %v; want what MASTERS says, %v", m1, err, m)
	}
	addr, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "kvring").StringSlice()
	if err != nil || !slices.Equal(addr, []string{"127.0.0.1", "1"}) {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME = %v, %v", addr, err)
	}
	for _, sub := range []string{"SLAVES", "REPLICAS"} {
		slaves, err := c.Do(ctx, "SENTINEL", sub, "kvring").Slice()
		if err != nil || len(slaves) != 1 {
			t.Fatalf("SENTINEL %s = %v, %v; want the other member", sub, slaves, err)
		}
		order, sl := fields(t, slaves[0])
		if !slices.Equal(order, slaveOrder) || sl["name"] != "127.0.0.2:2" || sl["flags"] != "slave" ||
			sl["master-host"] != "127.0.0.1" || sl["master-port"] != "1" || sl["master-link-status"] != "ok" {
			t.Fatalf("SENTINEL %s = %v\n(fields %v, want %v)", sub, sl, order, slaveOrder)
		}
	}
	sents, err := c.Do(ctx, "SENTINEL", "SENTINELS", "kvring").Slice()
	if err != nil || len(sents) != 1 {
		t.Fatalf("SENTINEL SENTINELS = %v, %v; want the other member", sents, err)
	}
	order, ms := fields(t, sents[0])
	other := SlotNode{ID: "other"}.RedisID()
	if !slices.Equal(order, sentinelOrder) || ms["name"] != other || ms["runid"] != other || ms["flags"] != "sentinel" || ms["port"] != "2" {
		t.Fatalf("SENTINEL SENTINELS = %v\n(fields %v, want %v)", ms, order, sentinelOrder)
	}
	if id := c.Do(ctx, "SENTINEL", "MYID").Val(); id != (SlotNode{ID: "n1"}).RedisID() {
		t.Fatalf("SENTINEL MYID = %v, want the SHA-1 of the node id", id)
	}
	if ok := c.Do(ctx, "SENTINEL", "CKQUORUM", "kvring").Val(); ok != "OK 2 usable Sentinels. Quorum and failover authorization can be reached" {
		t.Fatalf("SENTINEL CKQUORUM = %v", ok)
	}
	c3 := client(t, s, 3)
	r3, err := c3.Do(ctx, "SENTINEL", "MASTERS").Slice()
	if err != nil || len(r3) != 1 {
		t.Fatalf("RESP3 SENTINEL MASTERS = %v, %v", r3, err)
	}
	if _, ok := r3[0].(map[any]any); !ok {
		t.Fatalf("RESP3 SENTINEL MASTERS holds a %T, want a map as Redis sends", r3[0])
	}
	if _, m3 := fields(t, r3[0]); fmt.Sprint(m3) != fmt.Sprint(m) {
		t.Fatalf("RESP3 SENTINEL MASTERS = %v, want RESP2's %v", m3, m)
	}
}

// TestSentinelErrorsAreRedis: an unknown master name, a wrong argument
// count and an unknown subcommand get Redis Sentinel's own replies (the
// address of an unknown master is a null array, *-1 in RESP2 and _ in
// RESP3), and SENTINEL is answered before AUTH, as LMCache asks sentinels
// without a password.
func TestSentinelErrorsAreRedis(t *testing.T) {
	s, _ := testServer(t, func(c *Config, fc *fakeCluster) {
		c.SentinelMaster = "redismaster"
		fc.tokens = map[string]Access{"tok": {}}
	})
	nc, r := rawConn(t, s)
	for _, tc := range []struct{ cmd, want string }{
		{"SENTINEL GET-MASTER-ADDR-BY-NAME kvring", "*-1\r\n"},
		{"SENTINEL GET-MASTER-ADDR-BY-NAME redismaster", "*2\r\n$9\r\n127.0.0.1\r\n$1\r\n1\r\n"},
		{"SENTINEL MASTER kvring", "-ERR No such master with that name\r\n"},
		{"SENTINEL SLAVES kvring", "-ERR No such master with that name\r\n"},
		{"SENTINEL REPLICAS kvring", "-ERR No such master with that name\r\n"},
		{"SENTINEL SENTINELS kvring", "-ERR No such master with that name\r\n"},
		{"SENTINEL MASTER", "-ERR wrong number of arguments for 'sentinel|master' command\r\n"},
		{"SENTINEL MASTERS x", "-ERR wrong number of arguments for 'sentinel|masters' command\r\n"},
		{"SENTINEL MYID x", "-ERR wrong number of arguments for 'sentinel|myid' command\r\n"},
		{"SENTINEL GET-MASTER-ADDR-BY-NAME", "-ERR wrong number of arguments for 'sentinel|get-master-addr-by-name' command\r\n"},
		{"SENTINEL FOO", "-ERR unknown subcommand 'FOO'. Try SENTINEL HELP.\r\n"},
		{"SENTINEL MONITOR a 127.0.0.1 1 1", "-ERR unknown subcommand 'MONITOR'. Try SENTINEL HELP.\r\n"},
		{"SENTINEL", "-ERR wrong number of arguments for 'sentinel' command\r\n"},
		{"GET k", "-NOAUTH Authentication required.\r\n"},
		{"HELLO 3 AUTH default tok", ""},
		{"SENTINEL GET-MASTER-ADDR-BY-NAME kvring", "_\r\n"},
	} {
		if _, err := io.WriteString(nc, tc.cmd+"\r\n"); err != nil {
			t.Fatal(err)
		}
		if tc.want == "" { // HELLO's map: read past it with a PING
			io.WriteString(nc, "PING\r\n")
			readUntil(t, r, "+PONG\r\n")
			continue
		}
		got := make([]byte, len(tc.want))
		if _, err := io.ReadFull(r, got); err != nil || string(got) != tc.want {
			t.Fatalf("%s = %q, %v; want %q", tc.cmd, got, err, tc.want)
		}
	}
}

// readUntil reads r until it has read want.
func readUntil(t *testing.T, r interface{ ReadString(byte) (string, error) }, want string) {
	t.Helper()
	var all strings.Builder
	for !strings.HasSuffix(all.String(), want) {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for %q: %v (read %q)", want, err, all.String())
		}
		all.WriteString(line)
	}
}

// TestSentinelViewNamesALiveNode: the master a sentinel names is a node
// that serves the port: itself when it is in the table; the first node of
// the table when it is not (draining, not yet a ring member); with no node
// at all, the address the client reached, flagged s_down and o_down so that
// clients ask another sentinel (redis-py's check_master_state).
func TestSentinelViewNamesALiveNode(t *testing.T) {
	a, b, c := SlotNode{ID: "a", Host: "10.0.0.1", Port: 1}, SlotNode{ID: "b", Host: "10.0.0.2", Port: 2}, SlotNode{ID: "c", Host: "10.0.0.3", Port: 3}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9), Port: 9603}
	for _, tc := range []struct {
		name                string
		table               *SlotTable
		self                string
		master              SlotNode
		slaves, sentinels   []SlotNode
		flags               string
		otherSentinelsField string
	}{
		{"a member", &SlotTable{Self: 1, Nodes: []SlotNode{a, b, c}}, "b", b, []SlotNode{a, c}, []SlotNode{a, c}, "master", "2"},
		{"draining", &SlotTable{Self: -1, Nodes: []SlotNode{a, c}}, "b", a, []SlotNode{c}, []SlotNode{a, c}, "master", "2"},
		{"alone", &SlotTable{Self: 0, Nodes: []SlotNode{b}}, "b", b, nil, nil, "master", "0"},
		{"no ring", &SlotTable{Self: -1}, "b", SlotNode{ID: "b", Host: "127.0.0.9", Port: 9603}, nil, nil, "master,s_down,o_down", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newSentinelView("kvring", tc.self, tc.table, local)
			if v.master != tc.master || !slices.Equal(v.slaves, tc.slaves) || !slices.Equal(v.sentinels, tc.sentinels) {
				t.Fatalf("view = master %v slaves %v sentinels %v; want %v %v %v", v.master, v.slaves, v.sentinels, tc.master, tc.slaves, tc.sentinels)
			}
			_, m := fields(t, anySlice(v.masterFields()))
			if m["flags"] != tc.flags || m["num-other-sentinels"] != tc.otherSentinelsField || m["ip"] != tc.master.Host {
				t.Fatalf("master fields = %v, want flags %q, num-other-sentinels %s", m, tc.flags, tc.otherSentinelsField)
			}
			if v.myID != (SlotNode{ID: tc.self}).RedisID() {
				t.Fatalf("myID = %s", v.myID)
			}
		})
	}
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestClientAnswersAsRedis72: CLIENT subcommands Redis 7.2 does not know
// (MAINT_NOTIFICATIONS, which newer redis-py sends on connect) or kvring
// does not serve get Redis 7.2's unknown-subcommand error; wrong argument
// counts name the subcommand as Redis's do; NO-EVICT takes ON or OFF only;
// CLIENT HELP lists what is served.
func TestClientAnswersAsRedis72(t *testing.T) {
	s, _ := testServer(t, nil)
	nc, r := rawConn(t, s)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	for _, tc := range []struct{ cmd, want string }{
		{"CLIENT MAINT_NOTIFICATIONS on moving-endpoint-type internal-ip", "-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n"},
		{"CLIENT FOO", "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"},
		{"CLIENT KILL 1.2.3.4:5", "-ERR unknown subcommand 'KILL'. Try CLIENT HELP.\r\n"},
		{"CLIENT SETNAME", "-ERR wrong number of arguments for 'client|setname' command\r\n"},
		{"CLIENT GETNAME x", "-ERR wrong number of arguments for 'client|getname' command\r\n"},
		{"CLIENT ID x", "-ERR wrong number of arguments for 'client|id' command\r\n"},
		{"CLIENT NO-EVICT", "-ERR wrong number of arguments for 'client|no-evict' command\r\n"},
		{"CLIENT NO-EVICT x", "-ERR syntax error\r\n"},
		{"CLIENT NO-EVICT ON", "+OK\r\n"},
		{"CLIENT SETINFO lib-name redis-py", "+OK\r\n"},
		{"CLIENT", "-ERR wrong number of arguments for 'client' command\r\n"},
		{"CLIENT HELP", fmt.Sprintf("*%d\r\n+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GETNAME\r\n", len(clientHelp))},
	} {
		if _, err := io.WriteString(nc, tc.cmd+"\r\n"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(tc.want))
		if _, err := io.ReadFull(r, got); err != nil || string(got) != tc.want {
			t.Fatalf("%s = %q, %v; want %q", tc.cmd, got, err, tc.want)
		}
		if strings.HasPrefix(tc.cmd, "CLIENT HELP") {
			io.WriteString(nc, "PING\r\n")
			readUntil(t, r, "+PONG\r\n")
		}
	}
	// redis-py's client_info() reads these as integers, and fails
	// without one (as it did: KeyError 'oll').
	info := client(t, s, 2).Do(context.Background(), "CLIENT", "INFO").String()
	for _, f := range []string{"id", "age", "idle", "db", "sub", "psub", "multi", "qbuf", "qbuf-free", "obl", "argv-mem", "oll", "omem", "tot-mem"} {
		if !regexp.MustCompile(` ` + f + `=-?[0-9]+ `).MatchString(" " + info) {
			t.Errorf("CLIENT INFO has no integer %s: %s", f, info)
		}
	}
}

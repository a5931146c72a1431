package resp

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/internal/buildinfo"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestLMCacheAccessPatternInBothProtocols runs LMCache's sequence — SET
// kv_bytes, SET metadata, EXISTS metadata, GET both — in RESP2 and RESP3,
// with values small and large (read in place, written with writev).
func TestLMCacheAccessPatternInBothProtocols(t *testing.T) {
	s, _ := testServer(t, nil)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := client(t, s, proto)
		for _, size := range []int{100, 256 << 10, 2 << 20} {
			key := fmt.Sprintf("vllm@m@1@0@%x-%d", size, proto)
			kv, meta := randBytes(size), []byte(`{"shape":[2,32,256,8,128],"dtype":"bf16"}`)
			if err := c.Set(ctx, key+"kv_bytes", kv, 0).Err(); err != nil {
				t.Fatalf("RESP%d SET %d bytes: %v", proto, size, err)
			}
			if err := c.Set(ctx, key+"metadata", meta, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Exists(ctx, key+"metadata").Result(); err != nil || n != 1 {
				t.Fatalf("RESP%d EXISTS = %d, %v", proto, n, err)
			}
			got, err := c.Get(ctx, key+"kv_bytes").Bytes()
			if err != nil || !bytes.Equal(got, kv) {
				t.Fatalf("RESP%d GET of %d bytes: %v, equal %v", proto, size, err, bytes.Equal(got, kv))
			}
			vals, err := c.MGet(ctx, key+"kv_bytes", key+"metadata", key+"none").Result()
			if err != nil || vals[0] != string(kv) || vals[1] != string(meta) || vals[2] != nil {
				t.Fatalf("RESP%d MGET: %v", proto, err)
			}
		}
		if err := c.Get(ctx, "vllm@m@1@0@missing").Err(); err != redis.Nil {
			t.Fatalf("RESP%d GET of a missing key: %v, want nil", proto, err)
		}
	}
}

// TestValuesAreImmutable: a second SET of a key with the same bytes
// answers OK, with other bytes an error, and the first value stays; NX, XX
// and GET follow from that.
func TestValuesAreImmutable(t *testing.T) {
	s, _ := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	if ok, err := c.SetNX(ctx, "k", "first", 0).Result(); err != nil || !ok {
		t.Fatalf("SETNX of a new key = %v, %v", ok, err)
	}
	if err := c.Set(ctx, "k", "first", 0).Err(); err != nil {
		t.Fatalf("SET of an existing key with its bytes: %v, want OK", err)
	}
	if err := c.Set(ctx, "k", "second", 0).Err(); err == nil || !strings.Contains(err.Error(), "holds other bytes") {
		t.Fatalf("SET of an existing key with other bytes: %v, want an error", err)
	}
	if err := c.SetArgs(ctx, "k", "other", redis.SetArgs{Mode: "XX"}).Err(); err == nil || !strings.Contains(err.Error(), "holds other bytes") {
		t.Fatalf("SET XX of an existing key with other bytes: %v, want an error", err)
	}
	if err := c.SetArgs(ctx, "k", "first", redis.SetArgs{Mode: "XX"}).Err(); err != nil {
		t.Fatalf("SET XX of an existing key with its bytes: %v, want OK", err)
	}
	if v := c.Get(ctx, "k").Val(); v != "first" {
		t.Fatalf("GET = %q, want the first value", v)
	}
	if ok, _ := c.SetNX(ctx, "k", "third", 0).Result(); ok {
		t.Fatal("SETNX of an existing key stored it")
	}
	if err := c.SetArgs(ctx, "fresh", "v", redis.SetArgs{Mode: "XX"}).Err(); err != redis.Nil {
		t.Fatalf("SET XX of a missing key: %v, want nil", err)
	}
	if old, err := c.SetArgs(ctx, "k", "v", redis.SetArgs{Get: true}).Result(); err != nil || old != "first" {
		t.Fatalf("SET GET = %q, %v", old, err)
	}
	if err := c.Set(ctx, "ttl", "v", 3600e9).Err(); err != nil {
		t.Fatalf("SET EX: %v", err)
	}
	if d := c.TTL(ctx, "ttl").Val(); d != -1 {
		t.Fatalf("TTL = %v, want -1 (values do not expire)", d)
	}
	if d := c.TTL(ctx, "none").Val(); d != -2 {
		t.Fatalf("TTL of a missing key = %v, want -2", d)
	}
	if n, err := c.MSetNX(ctx, "k", "x", "new", "y").Result(); err != nil || n {
		t.Fatalf("MSETNX with an existing key = %v, %v", n, err)
	}
	if c.Exists(ctx, "new").Val() != 0 {
		t.Fatal("MSETNX wrote a key although another existed")
	}
}

// TestMSetOfOneKeyTwiceKeepsTheFirstValue: MSET k a k b writes k once.
func TestMSetOfOneKeyTwiceKeepsTheFirstValue(t *testing.T) {
	s, _ := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.MSet(ctx, "k", "a", "k", "b", "j", "c").Err(); err != nil {
		t.Fatal(err)
	}
	if v := c.MGet(ctx, "k", "j").Val(); v[0] != "a" || v[1] != "c" {
		t.Fatalf("MGET = %v", v)
	}
}

// TestSetIsOKOnlyWhenStored: a write the cluster rejects is an error reply
// with Redis's prefix for its cause, never OK, and a GET then finds nothing.
func TestSetIsOKOnlyWhenStored(t *testing.T) {
	s, fc := testServer(t, func(_ *Config, fc *fakeCluster) {
		fc.reject = func(Key) *kvringv1.PutChunkResult {
			return &kvringv1.PutChunkResult{Status: kvringv1.PutStatus_PUT_STATUS_FAILED, Code: 14, Reason: "node n2 did not answer"}
		}
	})
	c := client(t, s, 2)
	ctx := context.Background()
	err := c.Set(ctx, "k", "v", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") || !strings.Contains(err.Error(), "n2 did not answer") {
		t.Fatalf("SET of a value no node holds: %v, want TRYAGAIN naming the cause", err)
	}
	fc.mu.Lock()
	fc.reject = func(Key) *kvringv1.PutChunkResult {
		return &kvringv1.PutChunkResult{Status: kvringv1.PutStatus_PUT_STATUS_REJECTED, Code: 8, Reason: "no space"}
	}
	fc.mu.Unlock()
	if err := c.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET rejected for space: %v, want OOM", err)
	}
	if err := c.MSet(ctx, "a", "1", "b", "2").Err(); err == nil || !strings.Contains(err.Error(), "2 of 2 values not stored") {
		t.Fatalf("MSET: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET after a failed SET: %v, want nil", err)
	}
}

// TestDelRemovesAndCounts: DEL counts the keys it removed; EXISTS counts
// repeats.
func TestDelRemovesAndCounts(t *testing.T) {
	s, _ := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	c.MSet(ctx, "a@1", "x", "a@2", "y")
	if n := c.Exists(ctx, "a@1", "a@1", "a@2", "a@3").Val(); n != 3 {
		t.Fatalf("EXISTS = %d, want 3", n)
	}
	if n, err := c.Del(ctx, "a@1", "a@3", "b@1").Result(); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v, want 1", n, err)
	}
	if n := c.Unlink(ctx, "a@2").Val(); n != 1 {
		t.Fatalf("UNLINK = %d", n)
	}
	if n := c.Exists(ctx, "a@1", "a@2").Val(); n != 0 {
		t.Fatalf("EXISTS after DEL = %d", n)
	}
	if typ := c.Type(ctx, "a@1").Val(); typ != "none" {
		t.Fatalf("TYPE of a deleted key = %q", typ)
	}
}

// TestStringCommands: STRLEN, GETRANGE, TYPE, DBSIZE, ECHO, PING.
func TestStringCommands(t *testing.T) {
	s, _ := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	c.Set(ctx, "s", "Hello World", 0)
	if n := c.StrLen(ctx, "s").Val(); n != 11 {
		t.Errorf("STRLEN = %d", n)
	}
	for _, tc := range []struct {
		start, end int64
		want       string
	}{{0, 4, "Hello"}, {-5, -1, "World"}, {0, -1, "Hello World"}, {20, 30, ""}, {-3, 100, "rld"}} {
		if got := c.GetRange(ctx, "s", tc.start, tc.end).Val(); got != tc.want {
			t.Errorf("GETRANGE %d %d = %q, want %q", tc.start, tc.end, got, tc.want)
		}
	}
	if typ := c.Type(ctx, "s").Val(); typ != "string" {
		t.Errorf("TYPE = %q", typ)
	}
	if n := c.DBSize(ctx).Val(); n != 1 {
		t.Errorf("DBSIZE = %d", n)
	}
	if v := c.Echo(ctx, "hi").Val(); v != "hi" {
		t.Errorf("ECHO = %q", v)
	}
	if v := c.Ping(ctx).Val(); v != "PONG" {
		t.Errorf("PING = %q", v)
	}
	if err := c.Do(ctx, "LPUSH", "l", "x").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR unknown command 'LPUSH'") {
		t.Errorf("LPUSH: %v, want Redis's unknown command error", err)
	}
	if err := c.Do(ctx, "GET").Err(); err == nil || !strings.Contains(err.Error(), "wrong number of arguments for 'get'") {
		t.Errorf("GET without a key: %v", err)
	}
	if err := c.Set(ctx, "empty", "", 0).Err(); err == nil {
		t.Error("SET of an empty value answered OK; kvring stores none")
	}
}

// TestConnectionCommands: HELLO 3, CLIENT, SELECT, COMMAND, CONFIG GET, INFO
// as clients call them on connect.
func TestConnectionCommands(t *testing.T) {
	s, _ := testServer(t, nil)
	c := client(t, s, 3)
	ctx := context.Background()
	hello, err := c.Do(ctx, "HELLO", "3").Result()
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := hello.(map[any]any); !ok || m["proto"] != int64(3) || m["server"] != "redis" {
		t.Fatalf("HELLO 3 = %#v", hello)
	}
	if err := c.Do(ctx, "CLIENT", "SETNAME", "engine-1").Err(); err != nil {
		t.Fatal(err)
	}
	if n := c.Do(ctx, "CLIENT", "GETNAME").Val(); n != "engine-1" {
		t.Fatalf("CLIENT GETNAME = %v", n)
	}
	if id := c.ClientID(ctx).Val(); id <= 0 {
		t.Fatalf("CLIENT ID = %d", id)
	}
	if info := c.Do(ctx, "CLIENT", "INFO").String(); !strings.Contains(info, "name=engine-1") {
		t.Fatalf("CLIENT INFO = %s", info)
	}
	if err := c.Do(ctx, "SELECT", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "SELECT", "1").Err(); err == nil {
		t.Fatal("SELECT 1 answered OK")
	}
	cmds, err := c.Command(ctx).Result()
	if err != nil || cmds["get"] == nil || !cmds["get"].ReadOnly || cmds["set"].FirstKeyPos != 1 {
		t.Fatalf("COMMAND: %v %+v", err, cmds["get"])
	}
	if n := c.Do(ctx, "COMMAND", "COUNT").Val(); n != int64(len(commands)) {
		t.Fatalf("COMMAND COUNT = %v", n)
	}
	if err := c.Do(ctx, "COMMAND", "DOCS").Err(); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil || cfg["maxmemory"] != "67108864" || cfg["maxmemory-policy"] != "allkeys-lru" {
		t.Fatalf("CONFIG GET = %v, %v", cfg, err)
	}
	c.Set(ctx, "a", "b", 0)
	c.Get(ctx, "a")
	c.Get(ctx, "zz")
	info := c.Info(ctx).Val()
	for _, want := range []string{"# Server", "redis_version:", "# Clients", "connected_clients:1", "# Memory", "maxmemory:67108864",
		"# Stats", "keyspace_hits:1", "keyspace_misses:1", "# Keyspace", "db0:keys=1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if err := c.Do(ctx, "RESET").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAuthAndPermissions: with tokens, nothing but AUTH/HELLO before AUTH;
// a token's namespaces apply; FLUSHDB and CONFIG SET need the admin right.
func TestAuthAndPermissions(t *testing.T) {
	s, _ := testServer(t, func(_ *Config, fc *fakeCluster) {
		fc.tokens = map[string]Access{
			"engine-token-0123456789": {Allows: func(ns string) bool { return strings.HasPrefix(ns, "resp:vllm:llama") }},
			"admin-token-0123456789":  {Admin: true},
		}
	})
	ctx := context.Background()
	c := client(t, s, 2)
	if err := c.Set(ctx, "vllm@llama@1@0@a", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("SET before AUTH: %v, want NOAUTH", err)
	}
	if err := c.Do(ctx, "AUTH", "wrong").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH with a wrong token: %v", err)
	}
	eng := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Password: "engine-token-0123456789", Protocol: 2})
	defer eng.Close()
	if err := eng.Set(ctx, "vllm@llama@1@0@a", "v", 0).Err(); err != nil {
		t.Fatalf("SET in the token's namespace: %v", err)
	}
	if err := eng.Get(ctx, "vllm@mistral@1@0@a").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("GET outside the token's namespaces: %v, want NOPERM", err)
	}
	if err := eng.FlushDB(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("FLUSHDB with an engine token: %v, want NOPERM", err)
	}
	if err := eng.ConfigSet(ctx, "maxmemory", "1").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("CONFIG SET with an engine token: %v, want NOPERM", err)
	}
	adm := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Username: "default", Password: "admin-token-0123456789", Protocol: 3})
	defer adm.Close()
	if err := adm.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB with the admin token: %v", err)
	}
	if n := eng.Exists(ctx, "vllm@llama@1@0@a").Val(); n != 0 {
		t.Fatalf("EXISTS after FLUSHDB = %d", n)
	}
}

// TestPipelineRepliesComeInOrder sends a pipeline of many commands.
func TestPipelineRepliesComeInOrder(t *testing.T) {
	s, fc := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	p := c.Pipeline()
	vals := map[string][]byte{}
	for i := range 200 {
		k := "p@" + strings.Repeat("k", i%5) + string(rune('0'+i%10)) + string(rune('a'+i/10))
		vals[k] = randBytes(1 + i*300)
		p.Set(ctx, k, vals[k], 0)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	p = c.Pipeline()
	var gets []*redis.StringCmd
	var keys []string
	for k := range vals {
		keys = append(keys, k)
		gets = append(gets, p.Get(ctx, k))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, g := range gets {
		if b, _ := g.Bytes(); !bytes.Equal(b, vals[keys[i]]) {
			t.Fatalf("pipelined GET %d answered another value", i)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.publishN != len(vals) {
		t.Fatalf("%d SETs made %d writes", len(vals), fc.publishN)
	}
}

// TestMGetKeepsKeyOrderAcrossLocalAndRemoteKeys mixes keys this node holds
// with keys other nodes hold, and absent ones, in every order.
func TestMGetKeepsKeyOrderAcrossLocalAndRemoteKeys(t *testing.T) {
	s, _ := testServer(t, func(_ *Config, fc *fakeCluster) {
		fc.elsewhere = func(k Key) bool { return k.ID[0]%2 == 0 }
	})
	c := client(t, s, 2)
	ctx := context.Background()
	var keys []string
	want := map[string][]byte{}
	for i := range 40 {
		k := fmt.Sprintf("ns@%d", i)
		keys = append(keys, k)
		if i%5 == 4 {
			continue // absent
		}
		want[k] = randBytes(100 + i*1000)
		if err := c.Set(ctx, k, want[k], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	keys = append(keys, "other@1", keys[3], keys[0])
	got, err := c.MGet(ctx, keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if w, ok := want[k]; ok != (got[i] != nil) || (ok && got[i].(string) != string(w)) {
			t.Fatalf("MGET answered key %d (%s) with another value", i, k)
		}
	}
}

// TestClusterModeRedirectsKeysOfOtherNodes: in Redis Cluster mode a key of
// a slot this node does not own is answered -MOVED to its owner, unless a
// READONLY client reads a slot this node also owns; CLUSTER describes the
// slot table.
func TestClusterModeRedirectsKeysOfOtherNodes(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) { c.ClusterMode = true })
	c := client(t, s, 2)
	ctx := context.Background()
	mine, theirs := "bar", "foo" // slots 5061 and 12182
	if err := c.Set(ctx, mine, "v", 0).Err(); err != nil {
		t.Fatalf("SET of a key this node owns: %v", err)
	}
	if err := c.Set(ctx, theirs, "v", 0).Err(); err == nil || err.Error() != "MOVED 12182 127.0.0.2:2" {
		t.Fatalf("SET of another node's key: %v, want MOVED 12182 127.0.0.2:2", err)
	}
	if err := c.Get(ctx, theirs).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("GET of another node's key: %v", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Protocol: 2, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	defer rc.Close()
	if err := rc.Get(ctx, theirs).Err(); err != redis.Nil {
		t.Fatalf("READONLY GET of a slot this node also owns: %v, want nil (served here)", err)
	}
	if err := rc.Set(ctx, theirs, "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("READONLY SET of another node's key: %v, want MOVED", err)
	}
	//lint:ignore SA1019 CLUSTER SLOTS is what cluster clients (go-redis's own ClusterClient) read
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 2 || slots[0].End != 8191 || slots[1].Nodes[0].Addr != "127.0.0.2:2" || len(slots[0].Nodes[0].ID) != 40 {
		t.Fatalf("CLUSTER SLOTS = %+v, %v", slots, err)
	}
	if n := c.ClusterKeySlot(ctx, "foo").Val(); n != 12182 {
		t.Fatalf("CLUSTER KEYSLOT foo = %d", n)
	}
	nodes := c.ClusterNodes(ctx).Val()
	if !strings.Contains(nodes, "myself,master") || !strings.Contains(nodes, " 0-8191\n") || !strings.Contains(nodes, " 8192-16383\n") {
		t.Fatalf("CLUSTER NODES =\n%s", nodes)
	}
	if info := c.ClusterInfo(ctx).Val(); !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:2") {
		t.Fatalf("CLUSTER INFO =\n%s", info)
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil || len(shards) != 2 || shards[0].Slots[0].End != 8191 {
		t.Fatalf("CLUSTER SHARDS = %+v, %v", shards, err)
	}
}

// TestScanListsEveryKeyOnceAcrossPages: SCAN pages through every key
// written, with MATCH and TYPE applied, until the cursor is 0 again.
func TestScanListsEveryKeyOnceAcrossPages(t *testing.T) {
	s, _ := testServer(t, nil)
	c := client(t, s, 2)
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 2500 {
		k := fmt.Sprintf("vllm@m@1@0@%04x", i)
		suffix := "kv_bytes"
		if i%2 == 1 {
			suffix = "metadata"
		}
		if err := c.Set(ctx, k+suffix, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if suffix == "metadata" {
			want[k+suffix] = true
		}
	}
	got := map[string]int{}
	iter := c.Scan(ctx, 0, "*metadata", 10).Iterator()
	for iter.Next(ctx) {
		got[iter.Val()]++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("SCAN MATCH *metadata listed %d keys, want %d", len(got), len(want))
	}
	for k, n := range got {
		if !want[k] || n != 1 {
			t.Fatalf("SCAN listed %q %d times", k, n)
		}
	}
	if keys, cur, err := c.ScanType(ctx, 0, "", 10, "hash").Result(); err != nil || len(keys) != 0 || cur != 0 {
		t.Fatalf("SCAN TYPE hash = %v, %d, %v", keys, cur, err)
	}
}

// TestPipelinedGetsAreReadTogether: GETs a client pipelines are answered
// in order, each with its own reply, and the keys other nodes hold cost one
// cluster read for the whole pipeline.
func TestPipelinedGetsAreReadTogether(t *testing.T) {
	s, fc := testServer(t, func(_ *Config, fc *fakeCluster) {
		fc.elsewhere = func(Key) bool { return true }
	})
	c := client(t, s, 2)
	ctx := context.Background()
	want := map[string]string{}
	for i := range 50 {
		k := fmt.Sprintf("p@%d", i)
		want[k] = fmt.Sprint("value ", i)
		if err := c.Set(ctx, k, want[k], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fc.mu.Lock()
	fc.getCalls = 0
	fc.mu.Unlock()
	p := c.Pipeline()
	var cmds []*redis.StringCmd
	var keys []string
	for i := range 60 {
		k := fmt.Sprintf("p@%d", i) // 50 to 59 are missing
		keys = append(keys, k)
		cmds = append(cmds, p.Get(ctx, k))
	}
	p.Exec(ctx)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if w, ok := want[keys[i]]; ok != (err == nil) || v != w {
			t.Fatalf("pipelined GET %d = %q, %v; want %q", i, v, err, w)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.getCalls > 3 {
		t.Fatalf("60 pipelined GETs made %d cluster reads, want a few", fc.getCalls)
	}
}

// TestInfoServerNamesTheBuild: INFO server reports the node's build beside
// the Redis version clients check, as Redis reports redis_git_sha1, and
// zeros for a build that carries no commit.
func TestInfoServerNamesTheBuild(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		build buildinfo.Info
		want  []string
	}{
		{buildinfo.Info{Version: "v0.4.0", Commit: "0123456789abcdef0123456789abcdef01234567", CommitTime: at, GoVersion: "go1.26.0"},
			[]string{"kvring_version:v0.4.0\r\n", "kvring_git_sha1:0123456789abcdef0123456789abcdef01234567\r\n",
				"kvring_git_dirty:0\r\n", "kvring_commit_time:2026-01-02T03:04:05Z\r\n", "kvring_go_version:go1.26.0\r\n"}},
		{buildinfo.Info{Version: "v0.4.0+devel"},
			[]string{"kvring_version:v0.4.0+devel\r\n", "kvring_git_sha1:" + strings.Repeat("0", 40) + "\r\n",
				"kvring_commit_time:unknown\r\n"}},
	} {
		s, _ := testServer(t, func(c *Config, _ *fakeCluster) { c.Build = tc.build })
		c := redis.NewClient(&redis.Options{Addr: s.Addr().String()})
		info, err := c.Info(context.Background(), "server").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range append(tc.want, "redis_version:7.2.0\r\n") {
			if !strings.Contains(info, w) {
				t.Errorf("INFO server lacks %q:\n%s", w, info)
			}
		}
	}
}

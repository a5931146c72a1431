package resp

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cmdInfo answers INFO [section ...]: server, clients, memory, stats and
// keyspace, with the fields clients and dashboards read. The counters are
// the kvring_resp_* metrics' own.
func cmdInfo(_ context.Context, c *conn, req *request) {
	want := map[string]bool{}
	for _, a := range req.args[1:] {
		want[lower(a)] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	for _, sec := range []struct {
		name  string
		write func(*strings.Builder)
	}{
		{"server", c.s.infoServer}, {"clients", c.s.infoClients}, {"memory", c.s.infoMemory},
		{"stats", c.s.infoStats}, {"cluster", c.s.infoCluster}, {"keyspace", c.s.infoKeyspace},
	} {
		if !all && !want[sec.name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(sec.name[:1]) + sec.name[1:] + "\r\n")
		sec.write(&b)
	}
	c.w.bulkString(b.String())
}

func field(b *strings.Builder, k string, v any) { fmt.Fprintf(b, "%s:%v\r\n", k, v) }

// tcpPort is the port of the server's TCP listener, as INFO's tcp_port:
// "0" when it serves on a Unix socket alone (as Redis reports it).
func (s *Server) tcpPort() string {
	for _, l := range s.lis {
		if a := l.Addr().String(); l.Addr().Network() != "unix" {
			return a[strings.LastIndexByte(a, ':')+1:]
		}
	}
	return "0"
}

func (s *Server) infoServer(b *strings.Builder) {
	port := s.tcpPort()
	up := time.Since(s.start)
	field(b, "redis_version", redisVersion)
	field(b, "redis_mode", s.mode())
	field(b, "kvring_version", s.cfg.Build.Version)
	// As redis_git_sha1: zeros when the build carries no commit (go run,
	// go test, -buildvcs=false without make build's stamp).
	field(b, "kvring_git_sha1", cmp.Or(s.cfg.Build.Commit, strings.Repeat("0", 40)))
	field(b, "kvring_git_dirty", boolInt(s.cfg.Build.Modified))
	commitTime := "unknown"
	if t := s.cfg.Build.CommitTime; !t.IsZero() {
		commitTime = t.UTC().Format(time.RFC3339)
	}
	field(b, "kvring_commit_time", commitTime)
	field(b, "kvring_go_version", s.cfg.Build.GoVersion)
	field(b, "kvring_node", s.cfg.NodeID)
	field(b, "os", runtime.GOOS)
	field(b, "arch_bits", strconv.IntSize)
	field(b, "process_id", os.Getpid())
	field(b, "tcp_port", port)
	field(b, "uptime_in_seconds", int64(up.Seconds()))
	field(b, "uptime_in_days", int64(up.Hours()/24))
	exe, _ := os.Executable()
	field(b, "executable", path.Clean(exe))
}

func (s *Server) infoClients(b *strings.Builder) {
	field(b, "connected_clients", s.nconns.Load())
	field(b, "maxclients", s.cfg.MaxConns)
}

func (s *Server) infoMemory(b *strings.Builder) {
	st := s.cfg.Store.Stats()
	field(b, "used_memory", st.UsedBytes)
	field(b, "used_memory_human", human(st.UsedBytes))
	field(b, "maxmemory", st.LimitBytes)
	field(b, "maxmemory_human", human(st.LimitBytes))
	field(b, "maxmemory_policy", "allkeys-lru")
	field(b, "kvring_payload_bytes", st.PayloadBytes)
	field(b, "kvring_resident_bytes", st.ResidentBytes)
	// Redis's name for the memory its normal clients hold; here the heap
	// charged to MaxClientMemory.
	field(b, "mem_clients_normal", s.mem.used.Load())
	field(b, "maxmemory_clients", s.mem.limit)
}

func (s *Server) infoStats(b *strings.Builder) {
	st := s.cfg.Store.Stats()
	var evicted uint64
	for _, n := range st.Evictions {
		evicted += n
	}
	field(b, "total_connections_received", s.m.connsTotal.Load())
	field(b, "total_commands_processed", s.m.commandsN.Load())
	field(b, "rejected_connections", s.m.rejected.Load())
	field(b, "evicted_keys", evicted)
	field(b, "keyspace_hits", s.m.hits.Load())
	field(b, "keyspace_misses", s.m.misses.Load())
}

func (s *Server) infoCluster(b *strings.Builder) {
	if s.cfg.ClusterMode {
		field(b, "cluster_enabled", 1)
	} else {
		field(b, "cluster_enabled", 0)
	}
}

// mode is redis_mode: "cluster" in Redis Cluster mode, else "standalone".
func (s *Server) mode() string {
	if s.cfg.ClusterMode {
		return "cluster"
	}
	return "standalone"
}

func (s *Server) infoKeyspace(b *strings.Builder) {
	if n := s.localKeys(); n > 0 {
		field(b, "db0", fmt.Sprintf("keys=%d,expires=0,avg_ttl=0", n))
	}
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return strconv.FormatInt(n, 10) + "B"
}

// cmdConfig answers CONFIG GET pattern... with the few settings clients
// read, and refuses CONFIG SET (kvring's settings are its flags; an admin
// token is told so, anyone else NOPERM) and CONFIG RESETSTAT.
func cmdConfig(_ context.Context, c *conn, req *request) {
	switch sub := lower(req.args[1]); {
	case sub == "get" && len(req.args) >= 3:
		c.configGet(req.args[2:])
	case sub == "set" && len(req.args) >= 4:
		if !c.access.Admin {
			c.fail("noperm", prefixNoPerm+" CONFIG SET needs the admin right (the admin token, or serve --admin-actions)")
			return
		}
		c.fail("unsupported", errorf(prefixErr, "CONFIG SET is not supported: kvring's settings are flags of kvring serve"))
	default:
		c.fail("syntax", errorf(prefixErr, "unknown subcommand or wrong number of arguments for '%s'. Try CONFIG HELP.", clip(req.args[1])))
	}
}

// configGet writes the settings that match any of patterns (glob).
func (c *conn) configGet(patterns [][]byte) {
	st := c.s.cfg.Store.Stats()
	settings := [][2]string{
		{"maxmemory", strconv.FormatInt(st.LimitBytes, 10)},
		{"maxmemory-policy", "allkeys-lru"},
		{"maxclients", strconv.Itoa(c.s.cfg.MaxConns)},
		{"timeout", strconv.Itoa(int(c.s.cfg.IdleTimeout.Seconds()))},
		{"proto-max-bulk-len", strconv.FormatInt(c.s.cfg.Store.MaxChunkSize(), 10)},
		{"databases", "1"},
		{"save", ""},
		{"appendonly", "no"},
		{"cluster-enabled", map[bool]string{true: "yes", false: "no"}[c.s.cfg.ClusterMode]},
	}
	var out [][2]string
	for _, kv := range settings {
		for _, p := range patterns {
			if ok, _ := path.Match(lower(p), kv[0]); ok {
				out = append(out, kv)
				break
			}
		}
	}
	c.w.mapHeader(len(out))
	for _, kv := range out {
		c.w.bulkString(kv[0])
		c.w.bulkString(kv[1])
	}
}

// cmdFlushDB answers FLUSHDB [ASYNC|SYNC]: with the admin token (or on a
// --admin-actions), every RESP namespace is dropped from every member.
func cmdFlushDB(ctx context.Context, c *conn, req *request) {
	if len(req.args) > 2 {
		c.fail("syntax", errorf(prefixErr, "syntax error"))
		return
	}
	if !c.access.Admin {
		c.fail("noperm", prefixNoPerm+" FLUSHDB needs the admin right (AUTH with the admin token, or serve --admin-actions)")
		return
	}
	if _, err := c.s.cfg.Cluster.Flush(ctx); err != nil {
		c.failErr(err)
		return
	}
	c.w.ok()
}

// boolInt is 1 for true and 0 for false, as INFO writes flags.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

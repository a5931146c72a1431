package main

import (
	"github.com/spf13/pflag"

	"github.com/kvring/kvring/node"
)

// defaultRESPAddr is serve's Redis-protocol port (node.RESPConfig's default
// is off): kvring's own port range (gRPC 9600, admin 9602), not Redis's
// 6379, so a node starts with its defaults on a host that also runs
// redis-server. LMCache's remote_url names it: redis://host:9603.
const defaultRESPAddr = ":9603"

// registerServeRESP adds the --resp-* flags, bound to c's fields; their
// defaults are c's values (node.DefaultConfig's, the port set by
// newServeOptions).
func registerServeRESP(fs *pflag.FlagSet, c *node.RESPConfig) {
	fs.StringVar(&c.Addr, "resp-addr", c.Addr, `Redis-protocol port (RESP2/RESP3: LMCache's redis:// remote tier, any Redis client); "" turns it off`)
	fs.StringVar(&c.Socket, "resp-socket", c.Socket, `Unix socket the Redis protocol is also served on, for engines on this host (LMCache's remote_url unix:///path); same commands, auth and limits, no TLS; "" turns it off`)
	fs.Var((*fileMode)(&c.SocketMode), "resp-socket-mode", "permission bits of the Redis-protocol socket file, in octal")
	fs.BoolVar(&c.ClusterMode, "resp-cluster", c.ClusterMode, "answer as a Redis Cluster: CLUSTER SLOTS follows the ring, keys are placed by slot, -MOVED sends clients to the owner (every node must agree)")
	fs.IntVar(&c.MaxConns, "resp-max-conns", c.MaxConns, "most Redis-protocol connections at once; more are refused")
	fs.DurationVar(&c.IdleTimeout, "resp-idle-timeout", c.IdleTimeout, "close a Redis-protocol connection that sends no command for this long (negative: never)")
	fs.DurationVar(&c.CommandTimeout, "resp-command-timeout", c.CommandTimeout, "how long a Redis-protocol command may take to arrive once its first byte has")
	fs.DurationVar(&c.ExistsLease, "resp-exists-lease", c.ExistsLease, "a key EXISTS found held stays pinned against eviction this long, so the GET that follows finds it (negative: no lease)")
	fs.StringVar(&c.SentinelMaster, "resp-sentinel-master", c.SentinelMaster, "master name SENTINEL answers for: every node acts as a Redis Sentinel naming itself the master (LMCache's redis-sentinel://, its REDIS_SERVICE_NAME)")
	sizeVar(fs, &c.MaxClientMemory, "resp-max-client-memory", "heap all Redis-protocol connections may hold together for keys and queued replies; a request past it is answered -OOM and its connection closed")
	fs.StringVar(&c.KeyMap.Separator, "resp-namespace-separator", c.KeyMap.Separator, "separator of a key's fields; the fields that name a model and worker (not a chunk hash) make its namespace (docs/resp.md)")
	fs.StringVar(&c.KeyMap.Default, "resp-default-namespace", c.KeyMap.Default, "namespace (after resp:) of keys without the separator")
	fs.StringSliceVar(&c.KeyMap.Siblings, "resp-sibling-suffixes", c.KeyMap.Siblings, "key suffixes placed with the key that lacks them (a value and its metadata share owners)")
}

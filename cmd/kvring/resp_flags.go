package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/kvring/kvring/node"
)

// defaultRESPAddr is the Redis-protocol port's default: kvring's own port
// range (gRPC 9600, admin 9602), not Redis's 6379, so a node starts with its
// defaults on a host that also runs redis-server. LMCache's remote_url names
// it: redis://host:9603.
const defaultRESPAddr = ":9603"

// respFlags are serve's --resp-* flags, bound to the node's RESPConfig.
type respFlags struct {
	cfg      node.RESPConfig
	siblings []string
}

func registerServeRESP(fs *pflag.FlagSet, f *respFlags) {
	km := node.DefaultRESPKeyMap()
	f.cfg = node.RESPConfig{Addr: defaultRESPAddr, KeyMap: km, MaxConns: 10000, IdleTimeout: 5 * time.Minute,
		CommandTimeout: 30 * time.Second, MaxClientMemory: 512 << 20}
	fs.StringVar(&f.cfg.Addr, "resp-addr", f.cfg.Addr, `Redis-protocol port (RESP2/RESP3: LMCache's redis:// remote tier, any Redis client); "" turns it off`)
	fs.BoolVar(&f.cfg.ClusterMode, "resp-cluster", false, "answer as a Redis Cluster: CLUSTER SLOTS follows the ring, keys are placed by slot, -MOVED sends clients to the owner (every node must agree)")
	fs.IntVar(&f.cfg.MaxConns, "resp-max-conns", f.cfg.MaxConns, "most Redis-protocol connections at once; more are refused")
	fs.DurationVar(&f.cfg.IdleTimeout, "resp-idle-timeout", f.cfg.IdleTimeout, "close a Redis-protocol connection that sends no command for this long (negative: never)")
	fs.DurationVar(&f.cfg.CommandTimeout, "resp-command-timeout", f.cfg.CommandTimeout, "how long a Redis-protocol command may take to arrive once its first byte has")
	fs.Var((*byteSize)(&f.cfg.MaxClientMemory), "resp-max-client-memory", "heap all Redis-protocol connections may hold together for keys and queued replies; a request past it is answered -OOM and its connection closed (0: no bound)")
	fs.StringVar(&f.cfg.KeyMap.Separator, "resp-namespace-separator", km.Separator, "a key's namespace is the part before its last separator (LMCache: fmt@model@world@worker@hash)")
	fs.StringVar(&f.cfg.KeyMap.Default, "resp-default-namespace", km.Default, "namespace (after resp:) of keys without the separator")
	f.siblings = km.Siblings
	fs.StringSliceVar(&f.siblings, "resp-sibling-suffixes", km.Siblings, "key suffixes placed with the key that lacks them (a value and its metadata share owners)")
}

// config is the RESPConfig the flags give.
func (f *respFlags) config() node.RESPConfig {
	c := f.cfg
	c.KeyMap.Siblings = append([]string(nil), f.siblings...)
	if c.MaxClientMemory == 0 {
		c.MaxClientMemory = -1 // the flag's "no bound"; the config's zero is its default
	}
	return c
}

package loadtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig configures a Redis backend.
type RedisConfig struct {
	// Addr is the HOST:PORT of the redis-server. Required.
	Addr string
	// Namespace prefixes every key, so runs with different chunk layouts do
	// not share chunks. Required.
	Namespace string
	// CallTimeout bounds each call. Default 10s.
	CallTimeout time.Duration
}

// Redis is a Backend over one go-redis client, as one engine would hold it.
// A chunk is one string key (namespace + chunk id) holding the chunk's bytes;
// the server's maxmemory policy (allkeys-lru in the comparison) evicts them.
// It is safe for concurrent use.
type Redis struct {
	c       *redis.Client
	prefix  string
	timeout time.Duration
}

// NewRedis creates the client; it does not connect (see Ping).
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if cfg.Addr == "" {
		return nil, errors.New("redis backend: address is required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("redis backend: namespace is required")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	c := redis.NewClient(&redis.Options{
		Addr:                  cfg.Addr,
		Protocol:              2,
		DisableIdentity:       true,
		PoolSize:              2, // one engine calls one at a time
		DialTimeout:           cfg.CallTimeout,
		DialerRetries:         1,  // a server that is down fails the call at once
		MaxRetries:            -1, // and so does a dropped connection: no silent retries
		ContextTimeoutEnabled: true,
	})
	return &Redis{c: c, prefix: "kvring:" + cfg.Namespace + ":", timeout: cfg.CallTimeout}, nil
}

// Client returns the go-redis client.
func (r *Redis) Client() *redis.Client { return r.c }

func (r *Redis) key(id ChunkID) string { return r.prefix + string(id[:]) }

func (r *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", r.c.Options().Addr, err)
	}
	return nil
}

// isReply reports whether err is an error reply of the server (such as OOM),
// as opposed to a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// callErr wraps a failure of a whole call.
func (r *Redis) callErr(op string, err error) error {
	return fmt.Errorf("redis %s at %s: %w", op, r.c.Options().Addr, err)
}

// Lookup implements Backend with one pipelined EXISTS per id.
func (r *Redis) Lookup(ctx context.Context, ids, _ []ChunkID) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	cmds := make([]*redis.IntCmd, len(ids))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Exists(ctx, r.key(id))
		}
		return nil
	})
	if err != nil {
		return 0, r.callErr("lookup", err)
	}
	for i, c := range cmds {
		if c.Val() == 0 {
			return i, nil
		}
	}
	return len(ids), nil
}

// Get implements Backend with one MGET.
func (r *Redis) Get(ctx context.Context, ids, _ []ChunkID) ([]GetOutcome, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = r.key(id)
	}
	vals, err := r.c.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, r.callErr("get", err)
	}
	if len(vals) != len(ids) {
		return nil, r.callErr("get", fmt.Errorf("MGET returned %d values for %d keys", len(vals), len(ids)))
	}
	out := make([]GetOutcome, len(ids))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			out[i] = GetOutcome{Found: true, Data: []byte(s)}
		}
	}
	return out, nil
}

// Put implements Backend with one pipelined SET per chunk. A chunk is Stored
// when the server acknowledged its SET and Failed when the server answered
// with an error (OOM when it cannot evict); a failure to reach the server
// fails the call. Redis does not tell a new key from an overwritten one, so
// nothing is AlreadyHeld, and it has no admission policy, so nothing is
// Rejected.
func (r *Redis) Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	cmds := make([]*redis.StatusCmd, len(chunks))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range chunks {
			cmds[i] = p.Set(ctx, r.key(c.ID), c.Data, 0)
		}
		return nil
	})
	if err != nil && !isReply(err) {
		return nil, r.callErr("put", err)
	}
	out := make([]PutOutcome, len(chunks))
	for i, c := range cmds {
		switch err := c.Err(); {
		case err == nil:
			out[i] = Stored
		case isReply(err):
			out[i] = Failed
		default:
			return nil, r.callErr("put", err)
		}
	}
	return out, nil
}

// Evictions returns the server's evicted_keys counter (INFO stats).
func (r *Redis) Evictions(ctx context.Context) (uint64, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	info, err := r.c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, r.callErr("info", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, r.callErr("info", errors.New("no evicted_keys in INFO stats"))
}

// Close closes the client.
func (r *Redis) Close() error { return r.c.Close() }

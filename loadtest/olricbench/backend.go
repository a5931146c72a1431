package olricbench

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/buraksezer/olric"
	"github.com/buraksezer/olric/config"

	"github.com/kvring/kvring/loadtest"
)

// BackendConfig configures a Backend.
type BackendConfig struct {
	// Addrs are RESP addresses of Olric nodes (Cluster.Addrs). Required.
	Addrs []string
	// DMap names the distributed map the chunks go to; a namespace of its
	// own keeps runs with different layouts apart. Required.
	DMap string
	// CallTimeout bounds each call. Default 10s.
	CallTimeout time.Duration
}

// Backend is a loadtest.Backend over one Olric cluster client, as one engine
// would hold it. A chunk is one DMap entry keyed by its id in hex, holding
// its bytes; the client sends each Put and Get to the partition's primary
// owner, one round trip each. Olric has no batch and no existence check, so
// Lookup, Get and Put cost one call per chunk and Lookup reads the values.
// It is safe for concurrent use.
type Backend struct {
	cl      *olric.ClusterClient
	dm      olric.DMap
	timeout time.Duration
}

var _ loadtest.Backend = (*Backend)(nil)

// NewBackend connects a cluster client: it reads the members and the
// routing table, so the cluster must be up. It blocks until then.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if len(cfg.Addrs) == 0 || cfg.DMap == "" {
		return nil, errors.New("olric backend: addresses and a dmap name are required")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	cc := config.NewClient()
	cc.ReadTimeout, cc.WriteTimeout = cfg.CallTimeout, cfg.CallTimeout
	cc.MaxRetries = -1 // as for Redis: a failure fails the call, no silent retries
	cl, err := olric.NewClusterClient(cfg.Addrs, olric.WithConfig(cc),
		olric.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		return nil, fmt.Errorf("cannot connect to olric at %v: %w", cfg.Addrs, err)
	}
	dm, err := cl.NewDMap(cfg.DMap)
	if err != nil {
		cl.Close(context.Background())
		return nil, fmt.Errorf("cannot open olric dmap %q: %w", cfg.DMap, err)
	}
	return &Backend{cl: cl, dm: dm, timeout: cfg.CallTimeout}, nil
}

func key(id loadtest.ChunkID) string { return hex.EncodeToString(id[:]) }

// Lookup implements loadtest.Backend with one Get per id, until the first
// id not held.
func (b *Backend) Lookup(ctx context.Context, ids, _ []loadtest.ChunkID) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	for i, id := range ids {
		_, err := b.dm.Get(ctx, key(id))
		switch {
		case errors.Is(err, olric.ErrKeyNotFound):
			return i, nil
		case err != nil:
			return 0, fmt.Errorf("olric lookup: %w", err)
		}
	}
	return len(ids), nil
}

// Get implements loadtest.Backend with one Get per id.
func (b *Backend) Get(ctx context.Context, ids, _ []loadtest.ChunkID) ([]loadtest.GetOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	out := make([]loadtest.GetOutcome, len(ids))
	for i, id := range ids {
		res, err := b.dm.Get(ctx, key(id))
		switch {
		case errors.Is(err, olric.ErrKeyNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("olric get: %w", err)
		}
		data, err := res.Byte()
		if err != nil {
			return nil, fmt.Errorf("olric get: %w", err)
		}
		out[i] = loadtest.GetOutcome{Found: true, Data: data}
	}
	return out, nil
}

// Put implements loadtest.Backend with one Put per chunk. A chunk Olric
// refuses (too large for its tables, its key too long) is Failed; any other
// error fails the call. Olric overwrites without telling, so nothing is
// AlreadyHeld, and it has no admission policy, so nothing is Rejected.
func (b *Backend) Put(ctx context.Context, chunks []loadtest.Chunk) ([]loadtest.PutOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	out := make([]loadtest.PutOutcome, len(chunks))
	for i, c := range chunks {
		err := b.dm.Put(ctx, key(c.ID), c.Data)
		switch {
		case err == nil:
			out[i] = loadtest.Stored
		case errors.Is(err, olric.ErrEntryTooLarge), errors.Is(err, olric.ErrKeyTooLarge):
			out[i] = loadtest.Failed
		default:
			return nil, fmt.Errorf("olric put: %w", err)
		}
	}
	return out, nil
}

// Close closes the client.
func (b *Backend) Close() error { return b.cl.Close(context.Background()) }

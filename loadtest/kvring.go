package loadtest

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvring/kvring/client"
)

// KvringConfig configures a Kvring backend.
type KvringConfig struct {
	// Seeds are gRPC addresses of kvring nodes. Required.
	Seeds []string
	// Namespace and Schema name the chunks. Required (Schema needs Model and
	// TokensPerChunk).
	Namespace string
	Schema    client.Schema
	// PinTTL pins the chunks a lookup finds while the engine reads them; the
	// lease is released by the engine's next Put or Lookup. Default 0: no
	// pins.
	PinTTL time.Duration
	// CallTimeout bounds each call. Default 10s.
	CallTimeout time.Duration
	// Logger receives the SDK's connection log. Default slog.Default().
	Logger *slog.Logger
	// EagerPutBytes is client.Config.EagerPutBytes: puts up to this many
	// bytes skip the need exchange. Default 0: the SDK's default (1 MiB);
	// negative: never.
	EagerPutBytes int
	// Conn holds the connection's other settings (TLS, token); its Seeds and
	// Logger are replaced by the fields above. Default: zero, plaintext
	// without a token.
	Conn client.ConnConfig
	// ReadBufferBytes, when positive, makes Get read each chunk into a
	// buffer of this many bytes that the backend keeps and reuses
	// (client.GetPlacedInto), as an engine reads into its own KV buffers:
	// a read then allocates nothing per chunk, and each outcome's Data is
	// valid until the backend's next Get. A chunk longer than this is a
	// miss. Default 0: every chunk read gets a buffer of its own
	// (client.GetPlaced).
	ReadBufferBytes int
}

// Kvring is a Backend over one kvring SDK client, as one engine would hold
// it. It is not safe for concurrent use (it keeps the last lookup's lease);
// the Runner calls each backend from one goroutine.
type Kvring struct {
	c      *client.Client
	pinTTL time.Duration
	lease  uint64 // lease of the last Lookup, released by the next Put or Lookup
	// failure is the reason of the last Put's first chunk that was not
	// held (rejected or failed), "" when all were.
	failure string
	// bufSize and bufs: Get's reused read buffers (KvringConfig.ReadBufferBytes);
	// bufs grows to the longest batch read.
	bufSize int
	bufs    [][]byte
}

// ChunkFailure returns why the last Put left a chunk unheld ("" when it
// left none): the runner keeps the first for the report.
func (k *Kvring) ChunkFailure() string { return k.failure }

// NewKvring creates the client; it does not block (the client connects in the
// background and the first call waits for it).
func NewKvring(cfg KvringConfig) (*Kvring, error) {
	conn := cfg.Conn
	conn.Seeds, conn.Logger = cfg.Seeds, cfg.Logger
	c, err := client.New(client.Config{Conn: conn,
		Namespace: cfg.Namespace, Schema: cfg.Schema, CallTimeout: cfg.CallTimeout, Logger: cfg.Logger,
		EagerPutBytes: cfg.EagerPutBytes})
	if err != nil {
		return nil, err
	}
	return &Kvring{c: c, pinTTL: cfg.PinTTL, bufSize: max(cfg.ReadBufferBytes, 0)}, nil
}

// Client returns the SDK client.
func (k *Kvring) Client() *client.Client { return k.c }

// Lookup implements Backend.
func (k *Kvring) Lookup(ctx context.Context, ids, groups []ChunkID) (int, error) {
	k.release(ctx)
	res, err := k.c.LookupPlaced(ctx, ids, groups, k.pinTTL)
	if err != nil {
		return 0, err
	}
	k.lease = res.Lease
	return res.Held, nil
}

// Get implements Backend. A chunk the SDK reports not found (not held, no
// owner reachable, checksum failure) is an outcome with Found false.
func (k *Kvring) Get(ctx context.Context, ids, groups []ChunkID) ([]GetOutcome, error) {
	var res []client.GetResult
	var err error
	if k.bufSize > 0 {
		res, err = k.c.GetPlacedInto(ctx, ids, groups, k.readBuffers(len(ids)))
	} else {
		res, err = k.c.GetPlaced(ctx, ids, groups)
	}
	if err != nil {
		return nil, err
	}
	out := make([]GetOutcome, len(res))
	for i, r := range res {
		out[i] = GetOutcome{Found: r.Found, Data: r.Data}
	}
	return out, nil
}

// readBuffers returns n reused read buffers of bufSize bytes each.
func (k *Kvring) readBuffers(n int) [][]byte {
	for len(k.bufs) < n {
		k.bufs = append(k.bufs, make([]byte, k.bufSize))
	}
	return k.bufs[:n]
}

// release ends the pins of the last lookup, if any; a failure only leaves
// them to expire.
func (k *Kvring) release(ctx context.Context) {
	if k.lease == 0 {
		return
	}
	_ = k.c.ReleaseLease(ctx, k.lease)
	k.lease = 0
}

// Put implements Backend.
func (k *Kvring) Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error) {
	k.release(ctx)
	in := make([]client.Chunk, len(chunks))
	for i, c := range chunks {
		in[i] = client.Chunk{ID: c.ID, Data: c.Data, Group: c.Group}
	}
	res, err := k.c.Put(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]PutOutcome, len(res))
	k.failure = ""
	for i, r := range res {
		out[i] = r.Status // one of the four: the client reports Failed for anything else
		if !r.Status.Held() && k.failure == "" {
			k.failure = r.Status.String() + ": " + r.Reason
		}
	}
	return out, nil
}

// Close closes the client.
func (k *Kvring) Close() error { return k.c.Close() }

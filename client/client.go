package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/kvring/kvring/internal/nsschema"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Schema describes the KV layout of a namespace: model, dtype, tokens per
// chunk, layout, hash scheme, tensor-parallel rank and size, placement group
// size (ChunksPerGroup) and free-form Extra. Two clients with different
// schemas under one namespace name are refused (ErrSchemaMismatch, naming
// the fields that differ) instead of silently missing each other's chunks.
// It is the one schema type of the SDK, the local socket client and the
// admin API (node.NamespaceInfo).
type Schema = nsschema.Schema

// Config configures a Client.
type Config struct {
	// Conn says which nodes to connect to and how to reconnect.
	Conn ConnConfig
	// Namespace and Schema name and describe this engine's chunks. Required.
	Namespace string
	Schema    Schema
	// ReplicationFactor and MinReplicas are used when this client is the
	// first to register the namespace; 0 takes the cluster's default (1).
	ReplicationFactor, MinReplicas uint32
	// CallTimeout bounds a call whose context has no deadline. Default 10s.
	CallTimeout time.Duration
	// EagerPutBytes: a Put whose chunks add up to at most this many bytes
	// sends them without first asking which the cluster needs, costing one
	// round trip instead of two; the bytes of chunks already held then
	// travel for nothing. Default 1 MiB; negative: never.
	EagerPutBytes int
	// Logger receives connection state changes. Default slog.Default().
	Logger *slog.Logger
	// DisableRouting sends every call through the connected node, which
	// coordinates it. By default (false) the client fetches the cluster's
	// ring view (Cache.Topology) after connecting, when a node's epoch
	// changes and every ~10s, and sends each chunk's Put and Get straight to
	// its primary owner, falling back to the connected node when an owner
	// cannot take it (see Routing and route.go). A Lookup goes to the
	// primary owner of its first id's placement key (lookup_route.go).
	DisableRouting bool
}

// Client talks to a kvring cluster. Safe for concurrent use.
type Client struct {
	cfg  Config
	conn *conn
	// route sends chunks to their owners; nil when routing is disabled.
	route *router

	mu  sync.Mutex
	ref *kvringv1.NamespaceRef // nil until registered on the current node
	// maxChunk is the largest chunk the cluster stores (Limits from the
	// last registration; defaultMaxChunk before): a node declaring a larger
	// chunk in a Get is refused before anything is allocated.
	maxChunk uint64
	// leases are the lookup leases an owner granted (not the connected
	// node), to release them there; ended ones are dropped as new ones come.
	leases map[uint64]leaseGrant
}

// defaultMaxChunk is the node's default largest chunk (64 MiB), the bound on
// a read's declared size until a registration says otherwise.
const defaultMaxChunk = 64 << 20

// chunkBound is the largest chunk size a Get accepts from a node.
func (c *Client) chunkBound() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxChunk == 0 {
		return defaultMaxChunk
	}
	return c.maxChunk
}

// ErrSchemaMismatch: the namespace is registered with a different schema.
var ErrSchemaMismatch = transfer.ErrSchemaMismatch

// ErrUnauthenticated: the node refused the call for want of a valid token
// (ConnConfig.Token); the message names what was missing.
var ErrUnauthenticated = transfer.ErrUnauthenticated

// ErrPermissionDenied: the node accepted the token, but it does not allow
// the client's namespace.
var ErrPermissionDenied = transfer.ErrPermissionDenied

// The defaults of Config's settings.
const (
	defaultCallTimeout   = 10 * time.Second
	defaultEagerPutBytes = 1 << 20
)

// setDefaults sets every zero field of c to its default (CallTimeout also
// when negative); the connection's are set by ConnConfig.setDefaults.
func (c *Config) setDefaults() {
	if c.CallTimeout <= 0 {
		c.CallTimeout = defaultCallTimeout
	}
	if c.EagerPutBytes == 0 {
		c.EagerPutBytes = defaultEagerPutBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Conn.Logger == nil {
		c.Conn.Logger = c.Logger
	}
}

// New validates cfg and starts connecting in the background. It never
// blocks.
func New(cfg Config) (*Client, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("client: Config.Namespace is required")
	}
	if cfg.Schema.Model == "" || cfg.Schema.TokensPerChunk == 0 {
		return nil, errors.New("client: Config.Schema needs at least Model and TokensPerChunk")
	}
	cfg.setDefaults()
	var route atomic.Pointer[router]
	if !cfg.DisableRouting {
		user := cfg.Conn.OnStateChange
		cfg.Conn.OnStateChange = func(s ConnState) {
			if user != nil {
				user(s)
			}
			if r := route.Load(); r != nil {
				r.onState(s)
			}
		}
	}
	c, err := newConn(cfg.Conn)
	if err != nil {
		return nil, err
	}
	cl := &Client{cfg: cfg, conn: c}
	if !cfg.DisableRouting {
		cl.route = newRouter(c, cfg.Logger)
		route.Store(cl.route)
		// The router's loop may have dropped its first prompt (not yet
		// connected) and the connection come up before the Store, its
		// prompt then lost: prompt once more now that onState reaches it.
		cl.route.prompt()
	}
	return cl, nil
}

// State reports the connection state.
func (c *Client) State() ConnState { return c.conn.State() }

// Close stops the background connection work and closes the connections.
// Idempotent.
func (c *Client) Close() error {
	if c.route != nil {
		c.route.close()
	}
	return c.conn.close()
}

// withTimeout applies CallTimeout when ctx has no deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}

// Register registers the namespace (or checks this client's schema against
// the registered one) and returns the registered record's fingerprint. Put
// registers by itself when needed; Lookup and Get only check, and never
// create a namespace: reads of one nothing was written to (a misspelt name)
// answer nothing held (LookupResult.NotRegistered) and misses.
func (c *Client) Register(ctx context.Context) ([]byte, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cc, err := c.conn.ready(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := c.register(ctx, cc, true)
	if err != nil {
		return nil, err
	}
	return ref.GetFingerprint(), nil
}

// register registers the namespace at cc (create), or only checks it
// (transfer.RegisterExistingKey: a name the cluster does not know is then
// ErrUnknownNamespace), and keeps its reference.
func (c *Client) register(ctx context.Context, cc *grpc.ClientConn, create bool) (*kvringv1.NamespaceRef, error) {
	if !create {
		ctx = metadata.AppendToOutgoingContext(ctx, transfer.RegisterExistingKey, "true")
	}
	resp, err := kvringv1.NewCacheClient(cc).RegisterNamespace(ctx, &kvringv1.RegisterNamespaceRequest{
		Name: c.cfg.Namespace, Schema: c.cfg.Schema.Proto(), ReplicationFactor: c.cfg.ReplicationFactor, MinReplicas: c.cfg.MinReplicas})
	if err != nil {
		return nil, c.callErr(cc, "register namespace", err)
	}
	ref := &kvringv1.NamespaceRef{Name: resp.GetNamespace().GetName(), Fingerprint: resp.GetNamespace().GetFingerprint()}
	c.mu.Lock()
	c.ref = ref
	if m := resp.GetLimits().GetMaxChunkBytes(); m > 0 {
		c.maxChunk = m
	}
	c.mu.Unlock()
	return ref, nil
}

// namespace returns the registered reference, registering first if needed
// (create; a read only checks, see register).
func (c *Client) namespace(ctx context.Context, cc *grpc.ClientConn, create bool) (*kvringv1.NamespaceRef, error) {
	c.mu.Lock()
	ref := c.ref
	c.mu.Unlock()
	if ref != nil {
		return ref, nil
	}
	return c.register(ctx, cc, create)
}

// callErr maps a failed call to the client's error: transport failures tell
// the connection to re-check now; the server's message is kept.
func (c *Client) callErr(cc *grpc.ClientConn, what string, err error) error {
	switch transfer.Code(err) {
	case codes.Unavailable:
		c.conn.reportFailure(cc.Target(), err)
	case codes.Canceled:
		// The connection was closed under the call (the node was declared
		// lost) while the caller still waited: that is unavailability.
		if cc.GetState() == connectivity.Shutdown {
			c.conn.reportFailure(cc.Target(), err)
			return fmt.Errorf("kvring %s: %w", what, withCode(fmt.Errorf(
				"%w: connection to the kvring node was lost during the call: %v", transfer.ErrUnavailable, transfer.FromStatus(err))))
		}
	}
	return fmt.Errorf("kvring %s: %w", what, transfer.FromStatus(err))
}

// retryUnregistered runs call once more after re-registering when the node
// says the namespace is unknown (it restarted, or is new to the cluster).
// create is false for reads: they never register a namespace, and a name
// the cluster does not know is ErrUnknownNamespace (the caller answers a
// miss).
func (c *Client) retryUnregistered(ctx context.Context, cc *grpc.ClientConn, create bool, call func(*kvringv1.NamespaceRef) error) error {
	ref, err := c.namespace(ctx, cc, create)
	if err != nil {
		return err
	}
	err = call(ref)
	if !errors.Is(err, transfer.ErrUnknownNamespace) {
		return err
	}
	if ref, err = c.register(ctx, cc, create); err != nil {
		return err
	}
	return call(ref)
}

// notRegistered is the reason of a read's misses when the cluster does not
// know the namespace.
func (c *Client) notRegistered() string {
	return fmt.Sprintf("namespace %q is not registered: nothing was written to it", c.cfg.Namespace)
}

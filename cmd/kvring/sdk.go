package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvring/kvring/client"
)

// dataFlags are the flags of the commands that talk to a node's gRPC port
// through the SDK: put, get and lookup.
type dataFlags struct {
	addr        string
	namespace   string
	model       string
	dtype       string
	layout      string
	tokens      uint32
	replication uint32
	minReplicas uint32
	timeout     time.Duration
	sec         clientSecurity
}

func (d *dataFlags) register(fs *pflag.FlagSet) {
	d.addr, d.model, d.dtype, d.tokens, d.timeout = "127.0.0.1:9600", "kvring-cli", "bytes", 16, 5*time.Second
	fs.StringVar(&d.addr, "addr", d.addr, "gRPC address (HOST:PORT) of any kvring node")
	fs.StringVar(&d.namespace, "namespace", "", "namespace of the chunks (required)")
	fs.StringVar(&d.model, "model", d.model, "schema: model name the namespace is registered with")
	fs.StringVar(&d.dtype, "dtype", d.dtype, "schema: KV data type")
	fs.StringVar(&d.layout, "layout", "", "schema: KV layout")
	fs.Uint32Var(&d.tokens, "tokens-per-chunk", d.tokens, "schema: tokens per chunk")
	fs.Uint32Var(&d.replication, "replication", 0, "replication factor if this command registers the namespace (0: the cluster's default)")
	fs.Uint32Var(&d.minReplicas, "min-replicas", 0, "min replicas if this command registers the namespace (0: the cluster's default)")
	fs.DurationVar(&d.timeout, "timeout", d.timeout, "how long to wait for the connection, and for each call")
	d.sec.register(fs)
}

// connect creates an SDK client and waits up to --timeout for it to connect.
// The client creation never blocks; when the node does not answer in time the
// error names the address and the client's last error. The client logs only
// errors, to stderr, so that its connection chatter stays out of the output.
func (d *dataFlags) connect(ctx context.Context) (*client.Client, error) {
	if d.namespace == "" {
		return nil, fmt.Errorf("--namespace is required (or %s)", envName("namespace"))
	}
	if d.timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive, got %s", d.timeout)
	}
	changed := make(chan struct{}, 1)
	conn := client.ConnConfig{
		Seeds:       []string{d.addr},
		DialTimeout: min(2*time.Second, max(d.timeout/2, 100*time.Millisecond)),
		OnStateChange: func(client.ConnState) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	}
	d.sec.apply(&conn)
	c, err := client.New(client.Config{
		Conn:              conn,
		Namespace:         d.namespace,
		Schema:            client.Schema{Model: d.model, Dtype: d.dtype, TokensPerChunk: d.tokens, Layout: d.layout},
		ReplicationFactor: d.replication, MinReplicas: d.minReplicas,
		CallTimeout: d.timeout,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(d.timeout)
	defer timer.Stop()
	for {
		if c.State().Status == client.ConnConnected {
			return c, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			s := c.State()
			c.Close()
			cause := strings.TrimPrefix(s.LastError, d.addr+": ")
			if cause == "" {
				cause = "no answer"
			}
			return nil, fmt.Errorf("cannot connect to kvring node at %s within %s: %s", d.addr, d.timeout, oneLine(cause))
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("cannot connect to kvring node at %s: %w", d.addr, ctx.Err())
		}
	}
}

// callCtx bounds one call by --timeout.
func (d *dataFlags) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

// parseID parses a chunk id given as 64 hex characters.
func parseID(what, s string) (client.ChunkID, error) {
	id, err := client.ParseChunkID(s)
	if err != nil {
		return id, fmt.Errorf("%s: %s", what, err)
	}
	return id, nil
}

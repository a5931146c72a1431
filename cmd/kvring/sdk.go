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
	if err := awaitConnected(ctx, []*client.Client{c}, []string{d.addr}, d.timeout, changed); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
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

// awaitConnected waits until every client is connected, at most timeout.
// changed is signalled on every state change of any of them. A client whose
// attempts have gone once round its seeds without reaching a kvring node
// fails it at once, with the cause: nothing listens there (connection
// refused), the name does not resolve, or what answers is not gRPC (an
// admin port). A node that answers but does not serve yet is waited for.
// It does not close the clients.
func awaitConnected(ctx context.Context, cs []*client.Client, seeds []string, timeout time.Duration, changed <-chan struct{}) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, c := range cs {
		for {
			s := c.State()
			if s.Status == client.ConnConnected {
				break
			}
			if s.Attempt > len(seeds) && hopeless(s.LastError) {
				return connectError(s, seeds, "")
			}
			select {
			case <-changed:
			case <-timer.C:
				return connectError(c.State(), seeds, " within "+timeout.String())
			case <-ctx.Done():
				return fmt.Errorf("cannot connect to kvring node at %s: %w", strings.Join(seeds, ","), ctx.Err())
			}
		}
	}
	return nil
}

// Causes of a failed connection attempt that waiting does not cure.
const (
	causeRefused = "connection refused"
	causeNoHost  = "no such host"
	// causeHTTP1 is what gRPC says when an HTTP/1 server answers.
	causeHTTP1 = "frame header looked like an HTTP/1.1 header"
)

// hopeless reports whether a connection attempt's error (ConnState.LastError)
// says that waiting longer cannot help.
func hopeless(lastErr string) bool {
	for _, c := range []string{causeRefused, causeNoHost, causeHTTP1} {
		if strings.Contains(lastErr, c) {
			return true
		}
	}
	return false
}

// connectError says in one line why no node of seeds could be connected:
// the last attempt's cause, shortened, and for an HTTP server where gRPC
// was expected which port to use instead. within qualifies a timeout.
func connectError(s client.ConnState, seeds []string, within string) error {
	addr := s.Addr
	if addr == "" {
		addr = strings.Join(seeds, ",")
	}
	cause := strings.TrimPrefix(s.LastError, addr+": ")
	switch {
	case strings.Contains(cause, causeHTTP1):
		return fmt.Errorf("%s answers HTTP/1.1, not gRPC: is it a node's admin port? Use --addr with a node's gRPC port (default %s)",
			addr, defaultGRPCPort)
	case strings.Contains(cause, causeRefused):
		cause = causeRefused + " (is a kvring node listening there?)"
	case strings.Contains(cause, causeNoHost):
		cause = "the host name does not resolve: " + cause
	case cause == "":
		cause = "no answer"
	}
	return fmt.Errorf("cannot connect to kvring node at %s%s: %s", addr, within, oneLine(cause))
}

// The default ports, as errors name them.
const (
	defaultGRPCPort  = "9600"
	defaultAdminPort = "9602"
)

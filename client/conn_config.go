package client

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
)

// Defaults of ConnConfig, documented on its fields.
const (
	defaultConnDialTimeout   = 2 * time.Second
	defaultConnBackoffBase   = 100 * time.Millisecond
	defaultConnBackoffMax    = 5 * time.Second
	defaultConnJitter        = 0.2
	defaultConnProbeInterval = 1 * time.Second
	defaultConnProbeTimeout  = 1 * time.Second
)

// errInvalidConnConfig is wrapped by every error newConn returns for a bad ConnConfig.
var errInvalidConnConfig = errors.New("client: invalid connection config")

// ConnConfig configures the connection a client keeps to a kvring cluster. A zero field means its default.
type ConnConfig struct {
	// Seeds are the gRPC addresses (host:port, port 9600 by default on the server) of kvring nodes. Required.
	// They are tried in turn; any node of the cluster serves every call.
	Seeds []string

	// DialTimeout bounds one connection attempt: TCP connect, HTTP/2 handshake and the health check.
	// Default 2s.
	DialTimeout time.Duration

	// BackoffBase is the wait after the first failed attempt; each further failure doubles it. Default 100ms.
	BackoffBase time.Duration
	// BackoffMax caps the wait between attempts, jitter included. Default 5s.
	BackoffMax time.Duration
	// Jitter scales each wait, and each probe interval, by a random factor in [1-Jitter, 1+Jitter]. Default 0.2;
	// a negative value means no jitter. At most 1.
	Jitter float64

	// ProbeInterval is how often a connected client health-checks its node when nothing else prompts it. A closed
	// transport or a call failure reported by the call layer prompts a check at once. Default 1s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one health check while connected. A check that times out while the transport still
	// looks healthy is repeated once at once before the node is declared lost. Default 1s.
	ProbeTimeout time.Duration

	// Logger receives one line per state change and per connection attempt. Default slog.Default().
	Logger *slog.Logger

	// TLSCAFile, when set, makes the client speak TLS and verify nodes' certificates against this CA (PEM): the
	// cluster CA of nodes run with --tls-ca. Default "": plaintext.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are an optional client certificate and key (PEM) presented to nodes; they need
	// TLSCAFile. Nodes do not require one from engines (tokens authenticate engines), and a certificate the
	// cluster CA signed with the serverAuth usage is a node identity: give engines tokens instead.
	TLSCertFile, TLSKeyFile string
	// TLSServerName, when set, is the name expected in every node's certificate instead of the host dialled
	// (nodes are reached at the addresses they advertise, usually IPs). Default "".
	TLSServerName string
	// Token is a bearer token sent with every call (the node's --auth-tokens-file lists it with the namespace
	// prefixes it allows). Without TLS it travels in clear, and New logs a warning. Default "": none.
	Token string

	// DialOptions are appended to the client's own options (insecure transport credentials, a 1 MiB write
	// buffer), so they can override them, e.g. with TLS credentials. The codec (transfer.Codec) cannot be
	// replaced. Interceptors and stats handlers see data frames as *transfer.OutFrame and *transfer.InFrame,
	// not as protobuf messages.
	DialOptions []grpc.DialOption

	// OnStateChange, if set, is called with every new state, in order, from the connection's goroutine. It must
	// not block and must not call back into the client.
	OnStateChange func(ConnState)
}

// setDefaults sets every zero field of cfg to its default (and copies
// Seeds, so the caller's slice is not shared).
func (cfg *ConnConfig) setDefaults() {
	cfg.Seeds = append([]string(nil), cfg.Seeds...)
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = defaultConnDialTimeout
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = defaultConnBackoffBase
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = defaultConnBackoffMax
	}
	switch {
	case cfg.Jitter == 0:
		cfg.Jitter = defaultConnJitter
	case cfg.Jitter < 0:
		cfg.Jitter = 0
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = defaultConnProbeInterval
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = defaultConnProbeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
}

// validate checks a config that has been through setDefaults.
func (cfg ConnConfig) validate() error {
	if len(cfg.Seeds) == 0 {
		return fmt.Errorf("%w: Seeds: want at least one host:port address", errInvalidConnConfig)
	}
	for i, s := range cfg.Seeds {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return fmt.Errorf("%w: Seeds[%d]: want host:port, got %q", errInvalidConnConfig, i, s)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"DialTimeout", cfg.DialTimeout}, {"BackoffBase", cfg.BackoffBase}, {"BackoffMax", cfg.BackoffMax},
		{"ProbeInterval", cfg.ProbeInterval}, {"ProbeTimeout", cfg.ProbeTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s: want a positive duration, got %s", errInvalidConnConfig, d.name, d.v)
		}
	}
	if cfg.BackoffBase > cfg.BackoffMax {
		return fmt.Errorf("%w: BackoffBase %s exceeds BackoffMax %s", errInvalidConnConfig, cfg.BackoffBase, cfg.BackoffMax)
	}
	if cfg.Jitter > 1 {
		return fmt.Errorf("%w: Jitter: want at most 1, got %g", errInvalidConnConfig, cfg.Jitter)
	}
	return nil
}

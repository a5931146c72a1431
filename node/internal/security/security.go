package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kvring/kvring/node/membership"
)

// Config names the files holding a node's credentials (node.SecurityConfig). Every field
// is optional and off by default, which keeps a node as open as before
// (anyone who reaches a port may use it; the node logs one warning at
// start). The files are read by Start; Reload reads the tokens, the admin
// token and the certificates again. See docs/security.md.
type Config struct {
	// TLSCertFile and TLSKeyFile are the node's certificate (PEM, leaf
	// first, then intermediates) and private key. With them the gRPC port
	// speaks TLS only, and the node presents the certificate to its peers
	// too: it must carry both serverAuth and clientAuth extended key usages
	// and the names (or IPs) peers and clients dial, or the name in
	// TLSServerName. Both or neither. Default none: plaintext gRPC.
	TLSCertFile, TLSKeyFile string
	// TLSCAFile is the cluster CA (PEM). Required with TLSCertFile: the node
	// verifies its peers' server certificates against it, and the Peer
	// service accepts only callers presenting a certificate it signed that
	// has the serverAuth usage (a node certificate). Default none.
	TLSCAFile string
	// TLSServerName, when set, is the name this node expects in its peers'
	// certificates, instead of the host it dials (peers are dialled at the
	// gRPC address they advertise, usually an IP). Default "".
	TLSServerName string
	// ClusterKeyFile holds a secret shared by every node (at least 16 bytes;
	// surrounding whitespace is ignored). Peer calls carry an HMAC of it and
	// the Peer service refuses calls without it. With TLS as well, a peer
	// needs both. Without TLS it travels in clear: it keeps out callers who
	// can reach the port but not read the cluster's traffic. Default none.
	ClusterKeyFile string
	// AuthTokensFile lists the bearer tokens engines present, each with the
	// namespace prefixes it may use (see parseTokens). With it every Cache
	// call needs a valid token. Reload reads it again. Default none: Cache
	// calls are not authenticated.
	AuthTokensFile string
	// GossipKeyFile holds the gossip keyring (membership.ParseKeys: base64
	// keys, one a line, the first is the primary). Default none: gossip is
	// plaintext and any host may join.
	GossipKeyFile string
	// AdminTokenFile holds the admin token (its first line). With it the
	// admin API's /v1/* and /debug/pprof/* need "Authorization: Bearer
	// <token>"; /metrics, /healthz and /readyz stay open. Reload reads it
	// again. Default none: the admin API is open, and /v1/namespaces hides
	// fingerprints.
	AdminTokenFile string
	// AdminTLSCertFile and AdminTLSKeyFile, when set, make the admin port
	// speak HTTPS with this certificate. Both or neither. Default none.
	AdminTLSCertFile, AdminTLSKeyFile string
}

// Validate checks which files go together; it does no I/O.
func (c *Config) Validate() []error {
	var errs []error
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("TLS: set both the certificate and the key file (--tls-cert, --tls-key), or neither"))
	}
	if c.TLSCertFile != "" && c.TLSCAFile == "" {
		errs = append(errs, errors.New("TLS: a CA file (--tls-ca) is required with a certificate: peers are verified against it"))
	}
	if c.TLSCertFile == "" && (c.TLSCAFile != "" || c.TLSServerName != "") {
		errs = append(errs, errors.New("TLS: --tls-ca and --tls-server-name need a certificate (--tls-cert, --tls-key)"))
	}
	if (c.AdminTLSCertFile == "") != (c.AdminTLSKeyFile == "") {
		errs = append(errs, errors.New("admin TLS: set both the certificate and the key file (--admin-tls-cert, --admin-tls-key), or neither"))
	}
	return errs
}

// Credentials are a started node's credentials. Safe for concurrent use;
// Reload swaps the reloadable parts atomically. A nil *Credentials is no
// security: ServerOptions and PeerDialOptions add nothing.
type Credentials struct {
	cfg Config
	log *slog.Logger

	serverTLS *tls.Config // nil: plaintext gRPC
	clientTLS *tls.Config // for peer connections; nil without TLS
	cert      atomic.Pointer[tls.Certificate]

	clusterAuth string // the cluster key's HMAC, as sent; "" without a key

	tokens     atomic.Pointer[tokenSet] // nil without a tokens file
	adminToken atomic.Pointer[[32]byte] // SHA-256 of the admin token; nil without one
	adminTLS   *tls.Config              // nil: plain HTTP
	adminCert  atomic.Pointer[tls.Certificate]

	gossipKeys [][]byte
}

// Load reads the files cfg names. Errors name the file. It logs one
// warning when peer calls are unauthenticated.
func Load(cfg Config, log *slog.Logger) (*Credentials, error) {
	s := &Credentials{cfg: cfg, log: log}
	if err := s.loadTLS(); err != nil {
		return nil, err
	}
	if cfg.ClusterKeyFile != "" {
		key, err := readSecret(cfg.ClusterKeyFile, "cluster key", 16)
		if err != nil {
			return nil, err
		}
		s.clusterAuth = clusterAuthValue(key)
	}
	if err := s.reloadTokens(); err != nil {
		return nil, err
	}
	if cfg.GossipKeyFile != "" {
		b, err := os.ReadFile(cfg.GossipKeyFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read gossip key file: %w", err)
		}
		if s.gossipKeys, err = membership.ParseKeys(b); err != nil {
			return nil, fmt.Errorf("gossip key file %s: %w", cfg.GossipKeyFile, err)
		}
	}
	if cfg.AdminTLSCertFile != "" {
		if err := loadPair(&s.adminCert, cfg.AdminTLSCertFile, cfg.AdminTLSKeyFile, "admin TLS"); err != nil {
			return nil, err
		}
		s.adminTLS = &tls.Config{MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.adminCert.Load(), nil }}
	}
	if s.serverTLS == nil && s.clusterAuth == "" {
		log.Warn("peer calls are unauthenticated: anyone who reaches the gRPC port can call the Peer service " +
			"(write chunks, register namespaces); set --tls-cert/--tls-key/--tls-ca or --cluster-key-file (docs/security.md)")
	}
	return s, nil
}

// loadTLS builds the gRPC TLS configurations: one listener serves engines
// and peers, so the server asks for a client certificate and verifies it
// when one is given; the Peer service then requires one (peerAuth).
func (s *Credentials) loadTLS() error {
	c := s.cfg
	if c.TLSCertFile == "" {
		return nil
	}
	if err := loadPair(&s.cert, c.TLSCertFile, c.TLSKeyFile, "TLS"); err != nil {
		return err
	}
	pem, err := os.ReadFile(c.TLSCAFile)
	if err != nil {
		return fmt.Errorf("cannot read TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("TLS CA file %s holds no PEM certificate", c.TLSCAFile)
	}
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil }
	s.serverTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert,
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	s.clientTLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: c.TLSServerName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return s.cert.Load(), nil }}
	return nil
}

// loadPair loads a certificate and key into dst.
func loadPair(dst *atomic.Pointer[tls.Certificate], certFile, keyFile, what string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("cannot load %s certificate %s and key %s: %w", what, certFile, keyFile, err)
	}
	dst.Store(&cert)
	return nil
}

// readSecret reads a secret file: its contents without surrounding
// whitespace, at least min bytes.
func readSecret(path, what string, min int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s file: %w", what, err)
	}
	b = trimSpace(b)
	if len(b) < min {
		return nil, fmt.Errorf("%s file %s: want at least %d bytes, got %d", what, path, min, len(b))
	}
	return b, nil
}

// Reload reads the tokens, the admin token and the certificates again. A
// file that cannot be read leaves the previous value in force; the error
// names it. It does not block on the network.
func (s *Credentials) Reload() error {
	var errs []error
	if err := s.reloadTokens(); err != nil {
		errs = append(errs, err)
	}
	if s.cfg.TLSCertFile != "" {
		if err := loadPair(&s.cert, s.cfg.TLSCertFile, s.cfg.TLSKeyFile, "TLS"); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cfg.AdminTLSCertFile != "" {
		if err := loadPair(&s.adminCert, s.cfg.AdminTLSCertFile, s.cfg.AdminTLSKeyFile, "admin TLS"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ServerOptions are the gRPC server options security adds: TLS and the
// interceptors that authenticate Peer and Cache calls.
func (s *Credentials) ServerOptions() []grpc.ServerOption {
	if s == nil {
		return nil
	}
	var opts []grpc.ServerOption
	if s.serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.serverTLS)))
	}
	return append(opts, grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream))
}

// PeerDialOptions are the options of this node's connections to its
// peers: its certificate, and the cluster key.
func (s *Credentials) PeerDialOptions() []grpc.DialOption {
	if s == nil {
		return nil
	}
	var opts []grpc.DialOption
	if s.clientTLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(s.clientTLS)))
	}
	if s.clusterAuth != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(clusterKeyCreds{value: s.clusterAuth}))
	}
	return opts
}

// ServerTLS is the TLS configuration of the node's ports that speak TLS
// with the node certificate (gRPC, the Redis protocol); nil: plaintext.
func (s *Credentials) ServerTLS() *tls.Config { return s.serverTLS }

// AdminTLS is the admin port's TLS configuration; nil: plain HTTP.
func (s *Credentials) AdminTLS() *tls.Config { return s.adminTLS }

// GossipKeys is the gossip keyring (the primary first); nil: plaintext
// gossip.
func (s *Credentials) GossipKeys() [][]byte { return s.gossipKeys }

// AdminTokenHash is the SHA-256 of the admin token, or nil when none is
// configured.
func (s *Credentials) AdminTokenHash() *[32]byte { return s.adminToken.Load() }

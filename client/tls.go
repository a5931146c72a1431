package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// securityOptions returns the dial options for the TLS and token settings of cfg: TLS transport credentials
// when TLSCAFile is set, the token as per-call credentials when Token is. It reads the certificate files.
func (cfg ConnConfig) securityOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if cfg.TLSCAFile == "" && (cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" || cfg.TLSServerName != "") {
		return nil, fmt.Errorf("%w: TLSCertFile, TLSKeyFile and TLSServerName need TLSCAFile", errInvalidConnConfig)
	}
	if cfg.TLSCAFile != "" {
		tc, err := cfg.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	}
	if cfg.Token != "" {
		if cfg.TLSCAFile == "" {
			cfg.Logger.Warn("sending a bearer token without TLS: anyone who can read the traffic can use it; set TLSCAFile")
		}
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds{token: cfg.Token}))
	}
	return opts, nil
}

// tlsConfig builds the client's TLS configuration from the files cfg names.
func (cfg ConnConfig) tlsConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(cfg.TLSCAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: TLSCAFile: %w", errInvalidConnConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: TLSCAFile %s holds no PEM certificate", errInvalidConnConfig, cfg.TLSCAFile)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: cfg.TLSServerName}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return nil, fmt.Errorf("%w: set both TLSCertFile and TLSKeyFile, or neither", errInvalidConnConfig)
	}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", errInvalidConnConfig, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// tokenCreds sends a bearer token with every call. It does not demand TLS (a cluster may run tokens on a
// trusted network without it); securityOptions warns instead.
type tokenCreds struct{ token string }

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return false }

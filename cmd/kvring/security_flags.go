package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node"
)

// registerServeSecurity adds the flags of node.SecurityConfig, bound to s's
// fields; their defaults are s's values (none: as open as before).
func registerServeSecurity(fs *pflag.FlagSet, s *node.SecurityConfig) {
	fs.StringVar(&s.TLSCertFile, "tls-cert", s.TLSCertFile, "node certificate (PEM; serverAuth and clientAuth usages): gRPC speaks TLS only, and peers are dialled with it")
	fs.StringVar(&s.TLSKeyFile, "tls-key", s.TLSKeyFile, "private key of --tls-cert (PEM)")
	fs.StringVar(&s.TLSCAFile, "tls-ca", s.TLSCAFile, "cluster CA (PEM): peers' certificates are verified against it, and only certificates it signed with serverAuth may call the Peer service")
	fs.StringVar(&s.TLSServerName, "tls-server-name", s.TLSServerName, "name expected in peers' certificates instead of the address dialled")
	fs.StringVar(&s.ClusterKeyFile, "cluster-key-file", s.ClusterKeyFile, "file holding a secret shared by every node (at least 16 bytes); peer calls must carry it")
	fs.StringVar(&s.AuthTokensFile, "auth-tokens-file", s.AuthTokensFile, "bearer tokens of engines, one a line: TOKEN PREFIX[,PREFIX...] (* for every namespace); reloaded on SIGHUP")
	fs.StringVar(&s.GossipKeyFile, "gossip-key-file", s.GossipKeyFile, "gossip keyring: base64 keys of 16, 24 or 32 bytes, one a line, the first encrypts")
	fs.StringVar(&s.AdminTokenFile, "admin-token-file", s.AdminTokenFile, "file holding the admin token: /v1/* and /debug/pprof/* then need it; reloaded on SIGHUP")
	fs.StringVar(&s.AdminTLSCertFile, "admin-tls-cert", s.AdminTLSCertFile, "certificate (PEM) for HTTPS on the admin port")
	fs.StringVar(&s.AdminTLSKeyFile, "admin-tls-key", s.AdminTLSKeyFile, "private key of --admin-tls-cert (PEM)")
}

// clientSecurity are the TLS and token flags of the commands that call the
// gRPC port (put, get, lookup, bench).
type clientSecurity struct {
	token, ca, cert, key, serverName string
}

func (c *clientSecurity) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.token, "token", "", "bearer token sent with every call (prefer the environment variable to the command line)")
	fs.StringVar(&c.ca, "tls-ca", "", "CA (PEM) to verify the nodes' certificates: speak TLS")
	fs.StringVar(&c.cert, "tls-cert", "", "client certificate (PEM) to present, with --tls-key (optional)")
	fs.StringVar(&c.key, "tls-key", "", "private key of --tls-cert (PEM)")
	fs.StringVar(&c.serverName, "tls-server-name", "", "name expected in the nodes' certificates instead of the address dialled")
}

// apply sets the TLS and token fields of cc.
func (c *clientSecurity) apply(cc *client.ConnConfig) {
	cc.Token, cc.TLSCAFile, cc.TLSCertFile, cc.TLSKeyFile, cc.TLSServerName = c.token, c.ca, c.cert, c.key, c.serverName
}

// adminSecurity are the flags of the commands that ask the admin API.
type adminSecurity struct {
	token, ca string
}

func (a *adminSecurity) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.token, "admin-token", "", "admin token, for nodes run with --admin-token-file (prefer the environment variable)")
	fs.StringVar(&a.ca, "admin-tls-ca", "", "CA (PEM) to verify an HTTPS admin port (give --admin as https://HOST:PORT)")
}

// httpClient returns the HTTP client for the admin API. Its connections
// read nothing before they have written (writeFirstConn), and it keeps no
// idle ones: a gRPC port sends its HTTP/2 settings unasked, which the
// transport would otherwise log to the command's stderr ("Unsolicited
// response received on idle HTTP channel") before the command says which
// port it reached.
func (a *adminSecurity) httpClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &writeFirstConn{Conn: c, wrote: make(chan struct{})}, nil
	}
	if a.ca == "" {
		return &http.Client{Transport: tr}, nil
	}
	pem, err := os.ReadFile(a.ca)
	if err != nil {
		return nil, fmt.Errorf("cannot read --admin-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--admin-tls-ca %s holds no PEM certificate", a.ca)
	}
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	return &http.Client{Transport: tr}, nil
}

// reloadOnHangup reloads the node's tokens, admin token and certificates on
// every SIGHUP until ctx ends, logging the outcome.
func reloadOnHangup(ctx context.Context, n *node.Node, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := n.Reload(); err != nil {
					log.Error("SIGHUP: reload failed; the previous credentials stay in force", "err", err)
					continue
				}
				log.Info("SIGHUP: credentials reloaded")
			}
		}
	}()
}

// writeFirstConn holds its reads until its first write (or Close), so bytes
// a server sends before it is asked are read as the answer to the request.
type writeFirstConn struct {
	net.Conn
	once  sync.Once
	wrote chan struct{}
}

func (c *writeFirstConn) Write(b []byte) (int, error) {
	c.once.Do(func() { close(c.wrote) })
	return c.Conn.Write(b)
}

func (c *writeFirstConn) Read(b []byte) (int, error) {
	<-c.wrote
	return c.Conn.Read(b)
}

func (c *writeFirstConn) Close() error {
	c.once.Do(func() { close(c.wrote) })
	return c.Conn.Close()
}

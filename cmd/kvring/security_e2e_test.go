package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// testPKI is a throwaway cluster CA with certificates, written as PEM files.
type testPKI struct {
	dir                   string
	ca                    string // the cluster CA
	nodeCert, nodeKey     string // serverAuth + clientAuth, 127.0.0.1 and localhost
	clientCert, clientKey string // clientAuth only, signed by the cluster CA
	rogueCert, rogueKey   string // a node certificate of another CA
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	caKey, caCert, caPEM := makeCA(t, "kvring test CA")
	p.ca = p.write(t, "ca.pem", caPEM)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	p.nodeCert, p.nodeKey = p.issue(t, "node", caCert, caKey, both)
	p.clientCert, p.clientKey = p.issue(t, "engine", caCert, caKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	rogueKey, rogueCA, _ := makeCA(t, "rogue CA")
	p.rogueCert, p.rogueKey = p.issue(t, "rogue", rogueCA, rogueKey, both)
	return p
}

func makeCA(t testing.TB, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (p *testPKI) issue(t testing.TB, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage []x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		p.write(t, name+"-key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func (p *testPKI) write(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsArgs are the serve flags of a node with the test PKI's node certificate.
func (p *testPKI) tlsArgs() []string {
	return []string{"--tls-cert", p.nodeCert, "--tls-key", p.nodeKey, "--tls-ca", p.ca}
}

// dial opens a raw gRPC connection with the given TLS certificate (or none),
// or in plaintext when tlsOn is false.
func (p *testPKI) dial(t *testing.T, addr string, tlsOn bool, certFile, keyFile string) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if tlsOn {
		pool := x509.NewCertPool()
		b, _ := os.ReadFile(p.ca)
		pool.AppendCertsFromPEM(b)
		tc := &tls.Config{RootCAs: pool}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// forgePeerCalls makes the three calls an attacker on the network tried
// (issue 11): PutNamespace with created_unix_ms=0, a Prepare stream and a
// Commit, and returns each call's error.
func forgePeerCalls(ctx context.Context, cc *grpc.ClientConn) map[string]error {
	pc := kvringv1.NewPeerClient(cc)
	errs := make(map[string]error)
	_, errs["PutNamespace"] = pc.PutNamespace(ctx, &kvringv1.PutNamespaceRequest{Namespace: &kvringv1.NamespaceRecord{
		Name: "victim", Fingerprint: make([]byte, 32), CreatedUnixMs: 0, CreatedBy: "evil",
		Schema: &kvringv1.NamespaceSchema{Model: "evil", TokensPerChunk: 16}}})
	if st, err := pc.Prepare(ctx); err != nil {
		errs["Prepare"] = err
	} else {
		_ = st.Send(&kvringv1.PrepareRequest{})
		_, errs["Prepare"] = st.Recv()
	}
	_, errs["Commit"] = pc.Commit(ctx, &kvringv1.CommitRequest{})
	return errs
}

func wantCodes(t *testing.T, what string, errs map[string]error, want codes.Code, msg string) {
	t.Helper()
	for call, err := range errs {
		if status.Code(err) != want || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: forged %s: %v (code %v), want %v naming %q", what, call, err, status.Code(err), want, msg)
		}
	}
}

// TestForgedPeerCallsWithoutAPeerIdentityAreRefused: the attack of issue 11
// against the real binary. With TLS, PutNamespace, Prepare and Commit from a
// caller without a certificate are Unauthenticated, from a caller with the
// cluster CA's client-only certificate PermissionDenied, and a certificate of
// another CA is not offered (or fails the handshake); with a cluster key, calls without it or
// with another are Unauthenticated. The registry never learns the forged
// namespace. Without either, the node warns once at start.
func TestForgedPeerCallsWithoutAPeerIdentityAreRefused(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)

	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", pki.tlsArgs()...)
		wantCodes(t, "no certificate", forgePeerCalls(ctx, pki.dial(t, n.grpc, true, "", "")), codes.Unauthenticated, "node certificate")
		wantCodes(t, "client certificate", forgePeerCalls(ctx, pki.dial(t, n.grpc, true, pki.clientCert, pki.clientKey)),
			codes.PermissionDenied, "not a node certificate")
		for call, err := range forgePeerCalls(ctx, pki.dial(t, n.grpc, true, pki.rogueCert, pki.rogueKey)) {
			// Go's client offers no certificate the server's CA list does
			// not name, so the call arrives without one.
			if c := status.Code(err); c != codes.Unavailable && c != codes.Unauthenticated {
				t.Errorf("rogue CA: forged %s: %v, want a failed handshake or Unauthenticated", call, err)
			}
		}
		for call, err := range forgePeerCalls(ctx, pki.dial(t, n.grpc, false, "", "")) {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("plaintext to a TLS port: forged %s: %v, want Unavailable", call, err)
			}
		}
		checkNoForgedNamespace(t, n)
		if strings.Contains(n.logs(), "peer calls are unauthenticated") {
			t.Error("a node with TLS warned that peer calls are unauthenticated")
		}
	})

	t.Run("cluster key", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		key := writeFile(t, "cluster.key", "an example cluster key, 32 bytes\n")
		n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--cluster-key-file", key)
		cc := pki.dial(t, n.grpc, false, "", "")
		wantCodes(t, "no key", forgePeerCalls(ctx, cc), codes.Unauthenticated, "without the cluster key")
		wrong := metadata.AppendToOutgoingContext(ctx, "kvring-cluster-auth", strings.Repeat("0", 64))
		wantCodes(t, "wrong key", forgePeerCalls(wrong, cc), codes.Unauthenticated, "another cluster key")
		checkNoForgedNamespace(t, n)
		// The error table maps the code back for SDK users.
		if err := transfer.FromStatus(forgePeerCalls(ctx, cc)["Commit"]); !errors.Is(err, transfer.ErrUnauthenticated) {
			t.Errorf("FromStatus: %v does not match transfer.ErrUnauthenticated", err)
		}
	})

	t.Run("none", func(t *testing.T) {
		t.Parallel()
		n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
		if got := strings.Count(n.logs(), "peer calls are unauthenticated"); got != 1 {
			t.Errorf("a node without TLS or cluster key warned %d times that peer calls are unauthenticated, want once", got)
		}
	})
}

// checkNoForgedNamespace: the node's registry does not hold "victim".
func checkNoForgedNamespace(t *testing.T, n *e2eNode) {
	t.Helper()
	var got struct{ Namespaces []node.NamespaceInfo }
	if code, err := getJSON(n.admin, "/v1/namespaces", &got); err != nil || code != 200 {
		t.Fatalf("/v1/namespaces: %d %v", code, err)
	}
	if len(got.Namespaces) != 0 {
		t.Errorf("the forged namespace was registered: %+v", got.Namespaces)
	}
}

// secureEngine is an SDK client with the given token and TLS settings.
func secureEngine(t *testing.T, seeds []string, ns, token, ca string, rf uint32) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{
		Conn:      client.ConnConfig{Seeds: seeds, Token: token, TLSCAFile: ca, Logger: slog.New(slog.DiscardHandler)},
		Namespace: ns, Schema: client.Schema{Model: "llama-8b", Dtype: "bf16", TokensPerChunk: 16},
		ReplicationFactor: rf, CallTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "the client to connect", 15*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return c
}

var reloadedRe = regexp.MustCompile(`SIGHUP: credentials reloaded`)

// TestClientsWithoutAValidTokenAreRefused: with --auth-tokens-file a client
// without a token, or with one the file does not list, is Unauthenticated on
// every call; a token whose prefixes do not cover the namespace is
// PermissionDenied, naming the namespace; a good token puts and gets; the
// CLI takes --token; SIGHUP reloads the file. The admin API (HTTPS here)
// needs the admin token on /v1/*, not on the probes.
func TestClientsWithoutAValidTokenAreRefused(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	tokens := writeFile(t, "tokens", "# engines\nteam-a-token-0123456789 team-a/,shared/\n")
	adminToken := writeFile(t, "admin", "admin-token-0123456789\n")
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--auth-tokens-file", tokens,
		"--admin-token-file", adminToken, "--admin-tls-cert", pki.nodeCert, "--admin-tls-key", pki.nodeKey)
	ctx := context.Background()
	chunk := e2eChunk(1, 4096)

	for _, c := range []struct {
		name, token string
		code        codes.Code
		msg         string
	}{
		{"no token", "", codes.Unauthenticated, "without a bearer token"},
		{"wrong token", "not-a-listed-token-0000", codes.Unauthenticated, "not accepted"},
	} {
		cl := secureEngine(t, []string{n.grpc}, "team-a/llama", c.token, "", 0)
		_, err := cl.Put(ctx, []client.Chunk{chunk})
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, client.ErrUnauthenticated) {
			t.Errorf("%s: put: %v, want %v naming %q", c.name, err, c.code, c.msg)
		}
		if _, err := cl.Lookup(ctx, []client.ChunkID{chunk.ID}, 0); status.Code(err) != c.code {
			t.Errorf("%s: lookup: %v, want %v", c.name, err, c.code)
		}
	}
	other := secureEngine(t, []string{n.grpc}, "team-b/llama", "team-a-token-0123456789", "", 0)
	_, err := other.Put(ctx, []client.Chunk{chunk})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `namespace "team-b/llama"`) || !errors.Is(err, client.ErrPermissionDenied) {
		t.Errorf("other namespace: %v, want PermissionDenied naming team-b/llama", err)
	}
	good := secureEngine(t, []string{n.grpc}, "team-a/llama", "team-a-token-0123456789", "", 0)
	if res, err := good.Put(ctx, []client.Chunk{chunk}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("put with a good token: %v %+v", err, res)
	}
	if got, err := good.Get(ctx, []client.ChunkID{chunk.ID}); err != nil || !got[0].Found || !bytes.Equal(got[0].Data, chunk.Data) {
		t.Fatalf("get with a good token: %v %+v", err, got)
	}
	// A raw Get stream without a token: Unauthenticated before any byte.
	raw := kvringv1.NewCacheClient(pki.dial(t, n.grpc, false, "", ""))
	if gs, err := raw.Get(ctx, &kvringv1.GetRequest{Namespace: &kvringv1.NamespaceRef{Name: "team-a/llama"}, Ids: [][]byte{chunk.ID[:]}}); err == nil {
		if _, err = gs.Recv(); status.Code(err) != codes.Unauthenticated {
			t.Errorf("raw get without a token: %v, want Unauthenticated", err)
		}
	}

	cli := []string{"--addr", n.grpc, "--namespace", "team-a/cli", "--timeout", "10s"}
	id := strings.Repeat("ab", 32)
	if r := runCLI(t, nil, append([]string{"lookup", id}, cli...)...); r.code == 0 || !strings.Contains(r.stderr, "bearer token") {
		t.Errorf("kvring lookup without --token: %s", r)
	}
	mustCLI(t, []string{"KVRING_TOKEN=team-a-token-0123456789"}, append([]string{"lookup", id}, cli...)...)

	// SIGHUP: the file now lists another token only.
	if err := os.WriteFile(tokens, []byte("team-b-token-0123456789 team-b/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	n.waitLog(t, reloadedRe, 10*time.Second)
	if _, err := good.Lookup(ctx, []client.ChunkID{chunk.ID}, 0); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the removed token after SIGHUP: %v, want Unauthenticated", err)
	}
	b := secureEngine(t, []string{n.grpc}, "team-b/llama", "team-b-token-0123456789", "", 0)
	if res, err := b.Put(ctx, []client.Chunk{chunk}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("put with the token added by SIGHUP: %v %+v", err, res)
	}

	// Admin API over HTTPS.
	hc := httpsClient(t, pki.ca)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/v1/stats": 401, "/v1/namespaces": 401} {
		if code, _ := adminGet(t, hc, "https://"+n.admin+path, ""); code != want {
			t.Errorf("GET %s without a token = %d, want %d", path, code, want)
		}
	}
	if code, body := adminGet(t, hc, "https://"+n.admin+"/v1/stats", "wrong-admin-token-000"); code != 403 || !json.Valid(body) {
		t.Errorf("GET /v1/stats with a wrong token = %d %s, want 403 JSON", code, body)
	}
	code, body := adminGet(t, hc, "https://"+n.admin+"/v1/namespaces", "admin-token-0123456789")
	var ns struct{ Namespaces []node.NamespaceInfo }
	if err := json.Unmarshal(body, &ns); code != 200 || err != nil || len(ns.Namespaces) == 0 || ns.Namespaces[0].Fingerprint == "" {
		t.Errorf("GET /v1/namespaces with the admin token = %d %s, want fingerprints", code, body)
	}
	r := mustCLI(t, []string{"KVRING_ADMIN_TOKEN=admin-token-0123456789"}, "stats", "--admin", "https://"+n.admin, "--admin-tls-ca", pki.ca)
	if !strings.Contains(r.stdout, "chunks") {
		t.Errorf("kvring stats over HTTPS with the admin token: %s", r)
	}
}

func httpsClient(t *testing.T, ca string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(b)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
}

func adminGet(t *testing.T, hc *http.Client, url, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestASecuredThreeNodeClusterKeepsItsPromises: three nodes with TLS, mutual
// TLS between them, a cluster key, tokens, a gossip key and an admin token
// agree on the ring; an R=2 put is confirmed on two nodes and reads back;
// one node is killed and restarted with the same settings, and the cluster
// (and the same client) works on. A node with another gossip key is never a
// member.
func TestASecuredThreeNodeClusterKeepsItsPromises(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	gossipKey := writeFile(t, "gossip", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n")
	args := append(pki.tlsArgs(), "--cluster-key-file", writeFile(t, "cluster", "an example cluster key, 32 bytes\n"),
		"--auth-tokens-file", writeFile(t, "tokens", "engine-token-0123456789 e2e/\n"),
		"--gossip-key-file", gossipKey, "--admin-token-file", writeFile(t, "admin", "admin-token-0123456789\n"))
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", args...)
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", append(slices.Clone(args), "--join", n1.gossip)...)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", append(slices.Clone(args), "--join", n1.gossip)...)
	nodes := []*e2eNode{n1, n2, n3}
	members := func(n *e2eNode) int {
		code, body := adminGet(t, http.DefaultClient, "http://"+n.admin+"/v1/cluster", "admin-token-0123456789")
		var ci node.ClusterInfo
		if code != 200 || json.Unmarshal(body, &ci) != nil {
			return -1
		}
		alive := 0
		for _, m := range ci.Members {
			if m.Liveness == "alive" && m.State == "active" && m.RingMember {
				alive++
			}
		}
		return alive
	}
	testutil.Eventually(t, "three active members everywhere", 30*time.Second, func() bool {
		return members(n1) == 3 && members(n2) == 3 && members(n3) == 3
	})
	for _, n := range nodes {
		if strings.Contains(n.logs(), "peer calls are unauthenticated") {
			t.Errorf("node %s warned that peer calls are unauthenticated", n.id)
		}
	}

	// A rogue node with another gossip key tries to join and is refused.
	rogueArgs := append(pki.tlsArgs(), "--gossip-key-file", writeFile(t, "rogue-gossip", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))+"\n"),
		"--join", n1.gossip)
	startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", rogueArgs...)
	n1.waitLog(t, regexp.MustCompile(`refusing gossip from a host without the cluster's gossip key`), 30*time.Second)

	c := secureEngine(t, []string{n1.grpc, n2.grpc}, "e2e/llama", "engine-token-0123456789", pki.ca, 2)
	ctx := context.Background()
	roundTrip := func(what string, from, count uint64) {
		t.Helper()
		var chunks []client.Chunk
		var ids []client.ChunkID
		for i := range count {
			ch := e2eChunk(from+i, 64<<10)
			chunks, ids = append(chunks, ch), append(ids, ch.ID)
		}
		res, err := c.Put(ctx, chunks)
		if err != nil {
			t.Fatalf("%s: put: %v", what, err)
		}
		for i, r := range res {
			if r.Status != client.Stored || (!r.Degraded && len(r.Holders) != 2) {
				t.Fatalf("%s: chunk %d: %+v, want stored", what, i, r)
			}
		}
		got, err := c.Get(ctx, ids)
		if err != nil {
			t.Fatalf("%s: get: %v", what, err)
		}
		for i, g := range got {
			if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
				t.Fatalf("%s: chunk %d not read back: %s", what, i, g.Reason)
			}
		}
	}
	roundTrip("before the kill", 0, 32)
	if members(n1) != 3 {
		t.Fatalf("the rogue node was admitted: %d members", members(n1))
	}

	n3.kill(t)
	roundTrip("with a node dead", 100, 32)
	again := restartNode(t, n3, append(slices.Clone(args), "--join", n1.gossip)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("n1: %d members; restarted: %d members\nlogs of the restarted node:\n%s\nlogs of n1:\n%s", members(n1), members(again), again.logs(), n1.logs())
		}
	})
	testutil.Eventually(t, "the restarted node to be a member again", 30*time.Second, func() bool {
		return members(n1) == 3 && members(again) == 3
	})
	roundTrip("after the restart", 200, 32)
	for from, count := range map[uint64]uint64{0: 32, 200: 32} {
		for i := range count {
			ch := e2eChunk(from+i, 64<<10)
			if lr, err := c.Lookup(ctx, []client.ChunkID{ch.ID}, 0); err != nil || lr.Held != 1 {
				t.Fatalf("lookup of chunk %d after the restart: %v %+v", from+i, err, lr)
			}
		}
	}
}

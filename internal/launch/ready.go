package launch

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// readyFields are the fields of the "node ready" line the launcher reads.
var readyFields = []string{"node", "grpc", "admin", "gossip", "resp", "resp_socket"}

// textField matches key=value in a text (logfmt) log line; a value may be
// quoted.
var textField = regexp.MustCompile(`(?:^| )([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)`)

// parseReady returns the fields of a "node ready" line, text or JSON; nil
// for any other line.
func parseReady(line string) map[string]string {
	if strings.HasPrefix(line, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "node ready" {
			return nil
		}
		out := map[string]string{}
		for _, k := range readyFields {
			if v, ok := m[k].(string); ok {
				out[k] = v
			}
		}
		return out
	}
	if !strings.Contains(line, `msg="node ready"`) {
		return nil
	}
	out := map[string]string{}
	for _, m := range textField.FindAllStringSubmatch(line, -1) {
		out[m[1]] = strings.Trim(m[2], `"`)
	}
	return out
}

// awaitReady waits until the node is ready and records its id and
// addresses: from its "node ready" line, which names the ports it got, and
// when its log level hides that line, from its configuration (its ports
// are picked before it starts: pickPorts) and the id it keeps in
// DataDir/node_id. Then it polls /readyz until it answers 200.
func (n *Node) awaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ReadyTimeout)
	defer cancel()
	if quietLogs(n.cfg) {
		n.GRPC, n.Gossip, n.Admin = n.cfg.GRPCAddr, n.cfg.GossipAddr, n.cfg.AdminAddr
		if n.cfg.RESP {
			n.RESP = n.cfg.RESPAddr
		}
	} else {
		deadline, _ := ctx.Deadline()
		line, _ := n.log.await(0, func(l string) bool { return parseReady(l) != nil }, time.Until(deadline))
		if line == nil {
			return n.startErr("did not log that it is ready")
		}
		f := parseReady(*line)
		n.ID, n.GRPC, n.Admin, n.Gossip = f["node"], f["grpc"], f["admin"], f["gossip"]
		n.RESP, n.RESPSocket = off(f["resp"]), off(f["resp_socket"])
	}
	if err := waitReadyz(ctx, n.Admin, n.done); err != nil {
		return n.startErr(err.Error())
	}
	if n.ID == "" {
		b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "node_id"))
		if err != nil {
			return fmt.Errorf("%s is ready but its id is unknown: %w", n.cfg.Name, err)
		}
		n.ID = strings.TrimSpace(string(b))
	}
	return nil
}

// startErr says why a start failed: the process exited (ErrPortTaken when
// a port was in use) or it did not get ready (what) in time.
func (n *Node) startErr(what string) error {
	select {
	case <-n.done:
		if l := lineWith(n.Logs(), "address already in use"); l != "" {
			return fmt.Errorf("%s exited at start: %w: %s", n.cfg.Name, ErrPortTaken, l)
		}
		return fmt.Errorf("%s exited before it was ready:\n%s", n.cfg.Name, tail(n.Logs(), 30))
	default:
		return fmt.Errorf("%s %s within %v:\n%s", n.cfg.Name, what, n.cfg.ReadyTimeout, tail(n.Logs(), 30))
	}
}

// off maps the "off" a node logs for a port it does not serve to "".
func off(s string) string {
	if s == "off" {
		return ""
	}
	return s
}

// readyzEvery is how often waitReadyz asks.
const readyzEvery = 5 * time.Millisecond

// waitReadyz polls GET /readyz on admin until it answers 200, the process
// exits (exited closes) or ctx ends. An admin port that serves TLS is
// asked over TLS without verifying its certificate: the probe reads only
// readiness, from a node the launcher started on loopback.
func waitReadyz(ctx context.Context, admin string, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	scheme := "http"
	last := errors.New("no answer yet")
	for {
		code, tlsPort, err := getReadyz(ctx, hc, scheme+"://"+admin+"/readyz")
		switch {
		case code == http.StatusOK:
			return nil
		case tlsPort:
			scheme = "https"
		case err != nil:
			last = err
		default:
			last = fmt.Errorf("/readyz answered %d", code)
		}
		select {
		case <-exited:
			return fmt.Errorf("it exited before /readyz answered 200 (%v)", last)
		case <-ctx.Done():
			return fmt.Errorf("/readyz did not answer 200 in time (%v)", last)
		case <-time.After(readyzEvery):
		}
	}
}

// getReadyz asks url once; tlsPort says the port wants TLS.
func getReadyz(ctx context.Context, hc *http.Client, url string) (code int, tlsPort bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var b [128]byte
	k, _ := resp.Body.Read(b[:])
	return resp.StatusCode, resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b[:k]), "HTTPS server"), nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// lineWith is the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

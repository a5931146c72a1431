package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// adminFlags are the flags of the commands that ask a node's admin API.
type adminFlags struct {
	addr    string
	json    bool
	timeout time.Duration
	sec     adminSecurity
}

func (a *adminFlags) register(fs *pflag.FlagSet) {
	a.addr, a.timeout = "127.0.0.1:9602", 5*time.Second
	fs.StringVar(&a.addr, "admin", a.addr, "admin address (HOST:PORT) of any kvring node")
	fs.BoolVar(&a.json, "json", false, "print the node's JSON answer instead of a table")
	fs.DurationVar(&a.timeout, "timeout", a.timeout, "how long to wait for the node's answer")
	a.sec.register(fs)
}

// get fetches an admin endpoint and returns its JSON body. Every error is one
// line naming the address: the node cannot be reached (and why), or it
// answered with an error.
func (a *adminFlags) get(ctx context.Context, path string) ([]byte, error) {
	return a.call(ctx, http.MethodGet, a.addr, path)
}

// call sends method path to the admin API at addr (a.addr, or another
// member's admin address with a.addr's scheme), with get's errors.
func (a *adminFlags) call(ctx context.Context, method, addr, path string) ([]byte, error) {
	return a.callWith(ctx, method, addr, path, nil)
}

// callWith is call with a JSON request body (nil: none).
func (a *adminFlags) callWith(ctx context.Context, method, addr, path string, reqBody []byte) ([]byte, error) {
	base := addr
	if !strings.Contains(base, "://") {
		scheme := "http://"
		if strings.HasPrefix(a.addr, "https://") {
			scheme = "https://"
		}
		base = scheme + base
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var rd io.Reader
	if reqBody != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, rd)
	if err != nil {
		return nil, fmt.Errorf("bad admin address %q: %s", addr, oneLine(err.Error()))
	}
	if reqBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.sec.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.sec.token)
	}
	hc, err := a.sec.httpClient()
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if !strings.HasPrefix(base, "https://") && !dialFailed(err) && speaksHTTP2First(ctx, addr) {
			return nil, fmt.Errorf("%s answers gRPC, not the admin HTTP API: use --admin with a node's admin port (default %s)",
				addr, defaultAdminPort)
		}
		return nil, fmt.Errorf("cannot reach kvring node at %s: %s", addr, netCause(err, a.timeout))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("kvring node at %s: cannot read the answer to %s %s: %s", addr, method, path, netCause(err, a.timeout))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("kvring node at %s: %s %s: %s: %s", addr, method, path, resp.Status, oneLine(e.Error))
		}
		return nil, fmt.Errorf("kvring node at %s: %s %s: %s (is this a kvring admin address?)", addr, method, path, resp.Status)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("kvring node at %s: %s %s: the answer is not JSON (is this a kvring admin address?)", addr, method, path)
	}
	return body, nil
}

// decode parses a body get returned.
func (a *adminFlags) decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("kvring node at %s: cannot read its answer: %s", a.addr, oneLine(err.Error()))
	}
	return nil
}

// netCause says in a few words why a network call failed: "connection
// refused", "no answer within 5s", a DNS failure.
func netCause(err error, timeout time.Duration) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return oneLine(err.Error())
}

// dialFailed reports whether a request failed before a connection was
// made (refused, no route, a name that does not resolve, a timeout).
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// speaksHTTP2First reports whether the server at addr sends an HTTP/2
// SETTINGS frame as soon as a connection opens, before reading anything: a
// gRPC port does, an HTTP/1 server never speaks first. It waits at most a
// second for the frame.
func speaksHTTP2First(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	c.SetReadDeadline(deadline)
	var h [9]byte // a frame header: 3 bytes of length, type, flags, stream id
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return false
	}
	const frameSettings = 0x4
	return h[3] == frameSettings && h[5]|h[6]|h[7]|h[8] == 0 // on stream 0
}

package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/transfer"
)

// TestClientErrorsCarryTheTablesCode: the errors the client makes itself get their gRPC code from the transfer
// table, keep their message and still match their sentinels; passed on by a server (ToStatus) they reach the
// next client with the same code and sentinel.
func TestClientErrorsCarryTheTablesCode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err      error
		code     codes.Code
		sentinel error
	}{
		{fmt.Errorf("%w (connecting 127.0.0.1:1, attempt 1)", errNotConnected), codes.Unavailable, transfer.ErrUnavailable},
		{errConnClosed, codes.Canceled, transfer.ErrClientClosed},
		{fmt.Errorf("%w: 127.0.0.1:1: %w within 1s", transfer.ErrUnavailable, errNoAnswer), codes.Unavailable, transfer.ErrUnavailable},
	} {
		err := withCode(tt.err)
		if err.Error() != tt.err.Error() {
			t.Errorf("message %q, want %q", err, tt.err)
		}
		if got := status.Code(err); got != tt.code {
			t.Errorf("%v: status.Code = %s, want %s", err, got, tt.code)
		}
		if got := transfer.Code(fmt.Errorf("kvring put: %w", err)); got != tt.code {
			t.Errorf("%v: transfer.Code of the wrapped error = %s, want %s", err, got, tt.code)
		}
		if st, _ := status.FromError(err); st.Message() != tt.err.Error() {
			t.Errorf("status message %q, want %q", st.Message(), tt.err)
		}
		if !errors.Is(err, tt.err) || !errors.Is(err, tt.sentinel) {
			t.Errorf("%v does not match its own error and %v", err, tt.sentinel)
		}
		remote := transfer.FromStatus(transfer.ToStatus(err))
		if !errors.Is(remote, tt.sentinel) || transfer.Code(remote) != tt.code || remote.Error() != tt.err.Error() {
			t.Errorf("passed on: %v (%s), want %v with code %s", remote, transfer.Code(remote), tt.sentinel, tt.code)
		}
	}
	if withCode(nil) != nil {
		t.Error("withCode(nil) is not nil")
	}
}

// TestCallErrTurnsAConnectionClosedUnderTheCallIntoUnavailable: a call that fails because the client closed its
// connection under it (the node was declared lost) is Unavailable, and the connection is asked to re-check; a
// server's error keeps its code, sentinel and message.
func TestCallErrTurnsAConnectionClosedUnderTheCallIntoUnavailable(t *testing.T) {
	t.Parallel()
	const addr = "127.0.0.1:19000"
	cn := &conn{recheck: make(chan struct{}, 1)}
	cn.cur.Store(&connSnapshot{state: ConnState{Status: ConnConnected, Addr: addr}})
	c := &Client{conn: cn}
	rechecked := func() bool {
		select {
		case <-cn.recheck:
			return true
		default:
			return false
		}
	}

	open := idleConn(t, addr)
	err := c.callErr(open, "lookup", transfer.ToStatus(fmt.Errorf("%w: ns", transfer.ErrUnknownNamespace)))
	if !errors.Is(err, transfer.ErrUnknownNamespace) || status.Code(err) != codes.FailedPrecondition ||
		err.Error() != "kvring lookup: kvring: unknown namespace: ns" || rechecked() {
		t.Errorf("server error: %v (%s), re-check %v", err, status.Code(err), rechecked())
	}
	err = c.callErr(open, "get", status.Error(codes.Canceled, "context canceled"))
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled || rechecked() {
		t.Errorf("canceled call on a live connection: %v (%s)", err, status.Code(err))
	}

	lost := idleConn(t, addr)
	_ = lost.Close()
	err = c.callErr(lost, "put", status.Error(codes.Canceled, "grpc: the client connection is closing"))
	const want = "kvring put: kvring: unavailable: connection to the kvring node was lost during the call: " +
		"grpc: the client connection is closing"
	if !errors.Is(err, transfer.ErrUnavailable) || status.Code(err) != codes.Unavailable || err.Error() != want {
		t.Errorf("call on a connection closed under it: %v (%s), want Unavailable %q", err, status.Code(err), want)
	}
	if !rechecked() {
		t.Error("the connection was not asked to re-check")
	}
}

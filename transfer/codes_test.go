package transfer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kvring/kvring/store"
)

// overTheWire does to a server's error what gRPC does between server and
// client: the status is marshalled, sent and unmarshalled.
func overTheWire(t *testing.T, err error) error {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is not a status error", err)
	}
	b, merr := proto.Marshal(st.Proto())
	if merr != nil {
		t.Fatal(merr)
	}
	var p spb.Status
	if uerr := proto.Unmarshal(b, &p); uerr != nil {
		t.Fatal(uerr)
	}
	return status.FromProto(&p).Err()
}

func TestEverySentinelRoundTrips(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		code codes.Code
		also error // the generic sentinel the client error also matches
	}{
		{store.ErrNotFound, codes.NotFound, nil},
		{store.ErrAlreadyHeld, codes.AlreadyExists, nil},
		{store.ErrBusy, codes.Aborted, nil},
		{store.ErrLeaseExpired, codes.Aborted, nil},
		{store.ErrRejected, codes.ResourceExhausted, nil},
		{store.ErrNoSpace, codes.ResourceExhausted, nil},
		{store.ErrNotStaged, codes.FailedPrecondition, nil},
		{store.ErrChecksum, codes.DataLoss, nil},
		{store.ErrPinLimit, codes.ResourceExhausted, nil},
		{store.ErrSegmentLost, codes.Aborted, nil},
		{store.ErrIncomplete, codes.InvalidArgument, ErrInvalidArgument},
		{store.ErrInvalid, codes.InvalidArgument, ErrInvalidArgument},
		{store.ErrClosed, codes.Unavailable, ErrUnavailable},
		{ErrBadFrame, codes.InvalidArgument, ErrInvalidArgument},
		{ErrIncompleteStream, codes.InvalidArgument, ErrInvalidArgument},
		{ErrSchemaMismatch, codes.FailedPrecondition, nil},
		{ErrResourceExhausted, codes.ResourceExhausted, nil},
		{ErrUnknownNamespace, codes.FailedPrecondition, nil},
		{ErrInvalidArgument, codes.InvalidArgument, nil},
		{ErrUnauthenticated, codes.Unauthenticated, nil},
		{ErrPermissionDenied, codes.PermissionDenied, nil},
		{ErrUnavailable, codes.Unavailable, nil},
		{ErrClientClosed, codes.Canceled, context.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded, nil},
		{context.Canceled, codes.Canceled, nil},
	}
	if len(cases) != len(wireErrors) {
		t.Fatalf("%d cases for %d table rows: test every sentinel", len(cases), len(wireErrors))
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			t.Parallel()
			local := fmt.Errorf("cannot do it for chunk 7 (field begin.chunks[7].size): %w", c.err)
			if got := Code(local); got != c.code {
				t.Fatalf("Code = %v, want %v", got, c.code)
			}
			wire := ToStatus(local)
			st, _ := status.FromError(wire)
			if st.Code() != c.code || st.Message() != local.Error() {
				t.Fatalf("ToStatus = %v %q, want %v %q", st.Code(), st.Message(), c.code, local.Error())
			}
			remote := FromStatus(overTheWire(t, wire))
			if !errors.Is(remote, c.err) {
				t.Fatalf("FromStatus(%v) does not match %v", remote, c.err)
			}
			if c.also != nil && !errors.Is(remote, c.also) {
				t.Fatalf("FromStatus(%v) does not match %v", remote, c.also)
			}
			for _, row := range wireErrors {
				if row.err != c.err && row.err != c.also && errors.Is(remote, row.err) {
					t.Fatalf("FromStatus(%v) also matches %v", remote, row.err)
				}
			}
			if remote.Error() != local.Error() {
				t.Fatalf("message %q, want the server's %q", remote, local)
			}
			var re *RemoteError
			if !errors.As(remote, &re) || re.Code() != c.code {
				t.Fatalf("FromStatus returned %T, want a *RemoteError with code %v", remote, c.code)
			}
			if Code(remote) != c.code {
				t.Fatalf("Code(FromStatus) = %v, want %v", Code(remote), c.code)
			}
		})
	}
}

func TestTableReasonsAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, row := range wireErrors {
		if seen[row.reason] || row.reason == "" {
			t.Fatalf("reason %q empty or repeated", row.reason)
		}
		seen[row.reason] = true
		if row.code == codes.OK || row.code == codes.Unknown || row.code == codes.Internal {
			t.Fatalf("%v maps to %v", row.err, row.code)
		}
	}
}

func TestUnknownErrorsAreInternalWithTheirMessage(t *testing.T) {
	t.Parallel()
	err := errors.New("cannot open segment 3: permission denied")
	st, _ := status.FromError(ToStatus(err))
	if st.Code() != codes.Internal || st.Message() != err.Error() {
		t.Fatalf("%v %q, want Internal %q", st.Code(), st.Message(), err)
	}
	remote := FromStatus(overTheWire(t, st.Err()))
	if remote.Error() != err.Error() || Code(remote) != codes.Internal {
		t.Fatalf("FromStatus: %v %q", Code(remote), remote)
	}
	for _, row := range wireErrors {
		if errors.Is(remote, row.err) {
			t.Fatalf("an internal error matches %v", row.err)
		}
	}
}

func TestStatusErrorsPassThrough(t *testing.T) {
	t.Parallel()
	in := status.Error(codes.PermissionDenied, "no token")
	if out := ToStatus(in); status.Code(out) != codes.PermissionDenied || status.Convert(out).Message() != "no token" {
		t.Fatalf("ToStatus changed a status error: %v", out)
	}
	// A coordinator passing on a peer's error, with context, keeps its code
	// and its sentinel.
	peer := FromStatus(overTheWire(t, ToStatus(fmt.Errorf("cannot stage: %w", store.ErrNoSpace))))
	wrapped := fmt.Errorf("owner node-b: %w", peer)
	if Code(wrapped) != codes.ResourceExhausted {
		t.Fatalf("Code = %v, want ResourceExhausted", Code(wrapped))
	}
	again := FromStatus(overTheWire(t, ToStatus(wrapped)))
	if !errors.Is(again, store.ErrNoSpace) || again.Error() != "owner node-b: cannot stage: store: no space" {
		t.Fatalf("passed-on error: %q, ErrNoSpace %v", again, errors.Is(again, store.ErrNoSpace))
	}
}

func TestStatusWithoutKvringDetailMapsByCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code codes.Code
		want error
	}{
		{codes.Unavailable, ErrUnavailable},
		{codes.DeadlineExceeded, context.DeadlineExceeded},
		{codes.Canceled, context.Canceled},
		{codes.InvalidArgument, ErrInvalidArgument},
		{codes.NotFound, store.ErrNotFound},
		{codes.AlreadyExists, store.ErrAlreadyHeld},
		{codes.DataLoss, store.ErrChecksum},
		{codes.ResourceExhausted, nil}, // grpc's own "message larger than max" too: no guess
		{codes.FailedPrecondition, nil},
		{codes.Unimplemented, nil},
	}
	for _, c := range cases {
		remote := FromStatus(status.Error(c.code, "connection refused"))
		if remote.Error() != "connection refused" || Code(remote) != c.code {
			t.Fatalf("%v: %v %q", c.code, Code(remote), remote)
		}
		for _, row := range wireErrors {
			if want := row.err == c.want; errors.Is(remote, row.err) != want {
				t.Fatalf("%v: matches %v = %v, want %v", c.code, row.err, !want, want)
			}
		}
	}
}

func TestNilAndLocalErrors(t *testing.T) {
	t.Parallel()
	if ToStatus(nil) != nil || FromStatus(nil) != nil || Code(nil) != codes.OK {
		t.Fatal("nil is not kept nil / OK")
	}
	local := fmt.Errorf("cannot dial: %w", ErrUnavailable)
	if FromStatus(local) != local {
		t.Fatal("FromStatus changed an error that is not a status")
	}
}

// TestCodeErrorNamesTheDomainError: a front end that holds only a wire code
// (a PutChunkResult's) finds the domain error it stands for with errors.Is:
// resource limits, the codes worth a retry, and each code's own sentinel.
func TestCodeErrorNamesTheDomainError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code codes.Code
		want error
	}{
		{codes.ResourceExhausted, ErrResourceExhausted},
		{codes.Unavailable, ErrUnavailable},
		{codes.Aborted, ErrUnavailable},
		{codes.DeadlineExceeded, context.DeadlineExceeded},
		{codes.Canceled, context.Canceled},
		{codes.InvalidArgument, ErrInvalidArgument},
		{codes.NotFound, store.ErrNotFound},
		{codes.DataLoss, store.ErrChecksum},
		{codes.PermissionDenied, ErrPermissionDenied},
	}
	for _, c := range cases {
		if err := CodeError(uint32(c.code)); !errors.Is(err, c.want) {
			t.Errorf("CodeError(%s) = %v, want %v", c.code, err, c.want)
		}
	}
	if err := CodeError(uint32(codes.OK)); err != nil {
		t.Errorf("CodeError(OK) = %v, want nil", err)
	}
	err := CodeError(uint32(codes.FailedPrecondition))
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrResourceExhausted) {
		t.Errorf("CodeError(FailedPrecondition) = %v, want an error of its own", err)
	}
}

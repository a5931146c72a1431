package transfer

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/internal/storeerr"
)

// ErrorDomain is the ErrorInfo domain of kvring's status errors.
const ErrorDomain = "kvring"

// wireErrors is kvring's one table from domain errors to gRPC codes (the
// store's are named by internal/storeerr, which defines them, so that
// transfer does not link the store). The
// reason travels in a google.rpc.ErrorInfo detail so that FromStatus finds
// the sentinel again; reasons are part of the wire contract and never
// change. Order matters for errors that wrap several sentinels: the first
// match wins, so specific sentinels come before the generic ones.
//
// Choices worth a word:
//   - ErrUnknownNamespace is FailedPrecondition, not NotFound: the call
//     cannot succeed until the namespace is registered (the system's state
//     must change first), which is what FailedPrecondition says, and the
//     proto contract (NamespaceRef) promises it. NotFound would also read as
//     a cache miss to a client that treats a missing chunk as one.
//   - ErrLeaseExpired is Aborted, not FailedPrecondition: the staged slot is
//     gone, and the remedy is to retry the whole write (stage again), the
//     "retry at a higher level" that Aborted means.
//   - ErrRejected and ErrNoSpace are ResourceExhausted: the node declined to
//     hold more. For Put they appear as a chunk's code, not a call error.
//   - ErrChecksum is DataLoss: bytes were damaged.
//   - ErrSegmentLost is Aborted: the file under a staged chunk was deleted or
//     truncated, and a new write lands in another segment. (store.ErrFault
//     always comes with one of ErrNoSpace, ErrSegmentLost or ErrChecksum,
//     which decide the code.)
//   - ErrPinLimit is ResourceExhausted: the node holds as many pinned bytes
//     as it allows.
var wireErrors = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{storeerr.ErrNotFound, codes.NotFound, "CHUNK_NOT_FOUND"},
	{storeerr.ErrAlreadyHeld, codes.AlreadyExists, "ALREADY_HELD"},
	{storeerr.ErrBusy, codes.Aborted, "BUSY"},
	{storeerr.ErrLeaseExpired, codes.Aborted, "STAGE_LEASE_EXPIRED"},
	{storeerr.ErrRejected, codes.ResourceExhausted, "REJECTED"},
	{storeerr.ErrNoSpace, codes.ResourceExhausted, "NO_SPACE"},
	{storeerr.ErrNotStaged, codes.FailedPrecondition, "NOT_STAGED"},
	{storeerr.ErrChecksum, codes.DataLoss, "CHECKSUM_MISMATCH"},
	{storeerr.ErrPinLimit, codes.ResourceExhausted, "PIN_LIMIT"},
	{storeerr.ErrSegmentLost, codes.Aborted, "SEGMENT_LOST"},
	{storeerr.ErrIncomplete, codes.InvalidArgument, "CHUNK_INCOMPLETE"},
	{storeerr.ErrInvalid, codes.InvalidArgument, "STORE_INVALID"},
	{storeerr.ErrClosed, codes.Unavailable, "STORE_CLOSED"},
	{ErrBadFrame, codes.InvalidArgument, "BAD_FRAME"},
	{ErrIncompleteStream, codes.InvalidArgument, "INCOMPLETE_STREAM"},
	{ErrSchemaMismatch, codes.FailedPrecondition, "SCHEMA_MISMATCH"},
	{ErrResourceExhausted, codes.ResourceExhausted, "RESOURCE_EXHAUSTED"},
	{ErrUnknownNamespace, codes.FailedPrecondition, "UNKNOWN_NAMESPACE"},
	{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{ErrUnauthenticated, codes.Unauthenticated, "UNAUTHENTICATED"},
	{ErrPermissionDenied, codes.PermissionDenied, "PERMISSION_DENIED"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{ErrClientClosed, codes.Canceled, "CLIENT_CLOSED"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	{context.Canceled, codes.Canceled, "CANCELED"},
}

// codeErrors is the sentinel every error of a code also wraps on the client
// side, whatever its reason: callers test "bad input", "try elsewhere" or
// "out of time" without listing every specific sentinel.
var codeErrors = map[codes.Code]error{
	codes.InvalidArgument:  ErrInvalidArgument,
	codes.Unavailable:      ErrUnavailable,
	codes.DeadlineExceeded: context.DeadlineExceeded,
	codes.Canceled:         context.Canceled,
}

// codeOnlyErrors is the sentinel for a status without kvring's ErrorInfo
// (from grpc itself, a proxy, another implementation), for the codes that
// only one sentinel of the table stands for.
var codeOnlyErrors = map[codes.Code]error{
	codes.NotFound:      storeerr.ErrNotFound,
	codes.AlreadyExists: storeerr.ErrAlreadyHeld,
	codes.DataLoss:      storeerr.ErrChecksum,
	// gRPC itself answers Unauthenticated for a per-RPC credential it cannot
	// send (a token without transport security when the credential demands
	// it), and a proxy may refuse with either code.
	codes.Unauthenticated:  ErrUnauthenticated,
	codes.PermissionDenied: ErrPermissionDenied,
}

// lookup returns the table row err matches, or false.
func lookup(err error) (codes.Code, string, bool) {
	for _, row := range wireErrors {
		if errors.Is(err, row.err) {
			return row.code, row.reason, true
		}
	}
	return codes.Unknown, "", false
}

// Code returns the gRPC code for err: OK for nil, the code of a status error
// (also when wrapped), the table's code for a domain error, Internal for
// anything else. Safe for concurrent use.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if st, ok := carriedStatus(err); ok {
		return st.Code()
	}
	if code, _, ok := lookup(err); ok {
		return code
	}
	return codes.Internal
}

// carriedStatus returns the status an error carries (GRPCStatus, possibly
// wrapped), with the message of the whole error.
func carriedStatus(err error) (*status.Status, bool) {
	if err == nil {
		return nil, false // every message a stream receives: errors.As's target would escape to the heap
	}
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return nil, false
	}
	return status.FromError(err)
}

// ToStatus returns err as a status error for a gRPC server to return: the
// table's code, err's message unchanged, and an ErrorInfo detail naming the
// sentinel. A status error (or an error wrapping one, such as a peer's error
// FromStatus rebuilt) passes through with its code and details, its message
// being the whole error's. Anything else is Internal, message kept. nil
// stays nil. Safe for concurrent use.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := carriedStatus(err); ok {
		return st.Err()
	}
	code, reason, ok := lookup(err)
	if !ok {
		return status.Error(codes.Internal, err.Error())
	}
	st := status.New(code, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); derr == nil {
		st = d
	}
	return st.Err()
}

// FromStatus turns an error a gRPC call returned into a kvring error: one
// that wraps the sentinel the server's error wrapped (named by its ErrorInfo
// reason), plus ErrInvalidArgument, ErrUnavailable, context.DeadlineExceeded
// or context.Canceled for those codes, and keeps the server's message. A
// status without kvring's ErrorInfo maps by its code alone. The result is a
// *RemoteError; Code and ToStatus still see its code and details, so a
// coordinator can pass a peer's error on unchanged. nil and errors that are
// not status errors are returned as they are. Safe for concurrent use.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := carriedStatus(err)
	if !ok {
		return err
	}
	if st.Code() == codes.OK {
		return nil
	}
	re := &RemoteError{st: st}
	var specific error
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != ErrorDomain {
			continue
		}
		for _, row := range wireErrors {
			if row.reason == info.GetReason() {
				specific = row.err
				break
			}
		}
		break
	}
	if specific == nil {
		specific = codeOnlyErrors[st.Code()]
	}
	if specific != nil {
		re.errs = append(re.errs, specific)
	}
	if generic := codeErrors[st.Code()]; generic != nil && generic != specific {
		re.errs = append(re.errs, generic)
	}
	return re
}

// RemoteError is an error a kvring server or peer answered with, as
// FromStatus rebuilds it: the server's message, its code, and the sentinels
// errors.Is matches.
type RemoteError struct {
	st   *status.Status
	errs []error
}

// Error returns the server's message.
func (e *RemoteError) Error() string { return e.st.Message() }

// Unwrap returns the sentinels the error matches.
func (e *RemoteError) Unwrap() []error { return e.errs }

// Code returns the gRPC code the server answered with.
func (e *RemoteError) Code() codes.Code { return e.st.Code() }

// GRPCStatus returns the status the server answered with, so ToStatus and
// status.FromError pass it on unchanged.
func (e *RemoteError) GRPCStatus() *status.Status { return e.st }

// CodeError returns the domain error a wire code stands for, for a front
// end that holds only a code (a PutChunkResult's) and answers in its own
// protocol, so that it classifies with errors.Is and never with gRPC's
// codes: nil for OK; ErrResourceExhausted for RESOURCE_EXHAUSTED (the
// node declined to hold more); ErrUnavailable for UNAVAILABLE and for
// ABORTED (a stage lease that ended, a busy chunk, a lost segment: the
// write may be tried again); context.DeadlineExceeded, context.Canceled
// and ErrInvalidArgument for their codes; the one sentinel of a code that
// has one (NOT_FOUND, ALREADY_EXISTS, DATA_LOSS, UNAUTHENTICATED,
// PERMISSION_DENIED); otherwise an error naming the code. Safe for
// concurrent use; allocates only for that last kind.
func CodeError(code uint32) error {
	c := codes.Code(code)
	switch c {
	case codes.OK:
		return nil
	case codes.ResourceExhausted:
		return ErrResourceExhausted
	case codes.Aborted:
		return ErrUnavailable
	}
	if err, ok := codeErrors[c]; ok {
		return err
	}
	if err, ok := codeOnlyErrors[c]; ok {
		return err
	}
	return fmt.Errorf("kvring: %s", c)
}

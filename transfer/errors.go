package transfer

import "errors"

// Sentinel errors. Errors from this package wrap one of them (or one of
// store's), with context naming the chunk or the field; test them with
// errors.Is. codes.go maps each to its gRPC code.
var (
	// ErrBadFrame: a DataFrame broke the framing rules (index out of range,
	// offset not where the chunk's bytes stand, empty or oversized data, data
	// past the chunk's size). The message names the field. InvalidArgument.
	ErrBadFrame = errors.New("transfer: bad frame")
	// ErrIncompleteStream: the stream ended before every needed chunk was
	// complete. The message names the short chunks. InvalidArgument.
	ErrIncompleteStream = errors.New("transfer: stream ended with incomplete chunks")

	// ErrUnavailable: no node that could answer was reachable (not connected,
	// every owner down). Retrying later, or elsewhere, may succeed.
	// Unavailable.
	ErrUnavailable = errors.New("kvring: unavailable")
	// ErrClientClosed: the SDK client was closed; every call fails with it
	// from then on. Canceled, like grpc's own error for a closed ClientConn:
	// the caller ended it. Only clients make it.
	ErrClientClosed = errors.New("kvring: client is closed")
	// ErrResourceExhausted: the node holds as much of something (namespaces,
	// say) as it allows. ResourceExhausted.
	ErrResourceExhausted = errors.New("kvring: resource limit reached")
	// ErrSchemaMismatch: the caller's namespace fingerprint differs from the
	// registered one. FailedPrecondition.
	ErrSchemaMismatch = errors.New("kvring: namespace schema mismatch")
	// ErrUnknownNamespace: the namespace is not registered. FailedPrecondition:
	// the caller must register it first (see codes.go).
	ErrUnknownNamespace = errors.New("kvring: unknown namespace")
	// ErrInvalidArgument: bad input that no more specific sentinel describes.
	// The message names the field. InvalidArgument. FromStatus adds it to
	// every InvalidArgument error, so it also matches ErrBadFrame,
	// store.ErrInvalid and the rest of that code's sentinels on the client
	// side.
	ErrInvalidArgument = errors.New("kvring: invalid argument")
	// ErrUnauthenticated: the call carries no credential, or one the node
	// does not accept (a client without a valid bearer token, a peer call
	// without a node certificate or the cluster key). The message names what
	// was missing. Unauthenticated.
	ErrUnauthenticated = errors.New("kvring: unauthenticated")
	// ErrPermissionDenied: the caller's credential is valid but does not
	// allow this call (a token whose namespace prefixes do not cover the
	// namespace, a certificate that is not a node certificate). The message
	// names what was refused. PermissionDenied.
	ErrPermissionDenied = errors.New("kvring: permission denied")
)

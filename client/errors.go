package client

import (
	"fmt"

	"github.com/kvring/kvring/transfer"
)

// Errors the client makes itself. Each wraps the transfer sentinel whose row in kvring's one error table
// (transfer/codes.go) gives its gRPC code, and the client returns it through withCode, so that callers may test it
// with errors.Is or read its code with status.Code alike.
var (
	// errNotConnected is wrapped by the error ready returns while no node is connected: Unavailable.
	errNotConnected = fmt.Errorf("%w: not connected to any kvring node", transfer.ErrUnavailable)
	// errConnClosed is wrapped by the error ready returns after close: Canceled, like grpc's own error for a
	// closed ClientConn.
	errConnClosed = transfer.ErrClientClosed
)

// withCode returns err carrying the gRPC status that transfer.ToStatus builds for it from the table: status.Code,
// status.FromError and transfer.Code see the table's code, errors.Is and errors.As see everything err wraps, and
// the message is err's. err must wrap a table sentinel and no status error of its own. nil stays nil.
func withCode(err error) error {
	if err == nil {
		return nil
	}
	return &codedError{err: err, status: transfer.ToStatus(err)}
}

// codedError is an error of the client with its table status. The status comes first in Unwrap, so that a search
// for a GRPCStatus method (status.FromError, transfer.Code) finds it.
type codedError struct {
	err    error
	status error // transfer.ToStatus(err)
}

func (e *codedError) Error() string   { return e.err.Error() }
func (e *codedError) Unwrap() []error { return []error{e.status, e.err} }

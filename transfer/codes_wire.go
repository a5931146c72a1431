package transfer

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// This file holds the helpers that let other packages speak in gRPC codes
// without importing grpc/codes or grpc/status: the codes a vote or a commit
// result carries on the wire, and the decoding errors gRPC reports itself.

// WireCode is err's gRPC code as the uint32 that ChunkVote.code and
// CommitResult.code carry (0 for nil). The table in codes.go decides it.
func WireCode(err error) uint32 { return uint32(Code(err)) }

// CodeIs reports whether a wire code (ChunkVote.code, CommitResult.code) is
// the code the table gives sentinel: a receiver tells "busy" from "rejected"
// by the sentinel it would have matched had the call been local.
func CodeIs(code uint32, sentinel error) bool {
	c, _, ok := lookup(sentinel)
	return ok && uint32(c) == code
}

// Unreachable reports whether err (a status error, raw or rebuilt by
// FromStatus) says the other side was not reached or did not answer in time:
// Unavailable, DeadlineExceeded or Canceled.
func Unreachable(err error) bool {
	switch Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// RecvError turns an error from a server stream's RecvMsg (or a unary
// handler's decoding) into kvring's: a message gRPC could not decode is bad
// input (ErrInvalidArgument), where gRPC itself reports Internal; anything
// else is returned as it is.
func RecvError(err error) error {
	if !decodeFailure(err) {
		return err
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "rpc error: code = Internal desc = "); ok {
		msg = rest
	}
	return fmt.Errorf("%w: malformed request message: %s", ErrInvalidArgument, msg)
}

// StrictDecoding returns a copy of a generated service description whose
// handlers answer a request message that cannot be decoded with
// InvalidArgument (through RecvError and ToStatus) instead of gRPC's
// Internal. Register the copy in place of the generated description:
// gs.RegisterService(transfer.StrictDecoding(&kvringv1.Cache_ServiceDesc), impl).
func StrictDecoding(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *desc
	out.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		out.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: func(srv any, ctx context.Context,
			dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error {
				if err := dec(v); err != nil {
					return ToStatus(RecvError(err))
				}
				return nil
			}, icpt)
		}}
	}
	out.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, s := range desc.Streams {
		h := s.Handler
		s.Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, strictStream{stream})
		}
		out.Streams[i] = s
	}
	return &out
}

// strictStream answers undecodable stream messages with InvalidArgument.
type strictStream struct{ grpc.ServerStream }

func (s strictStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if decodeFailure(err) {
		return ToStatus(RecvError(err))
	}
	return err
}

// decodeFailure reports whether err is gRPC's own status for a message it
// could not decode (or decompress): Internal, raised while receiving.
func decodeFailure(err error) bool {
	st, ok := carriedStatus(err)
	return ok && st.Code() == codes.Internal
}

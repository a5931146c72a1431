package transfer

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Codec is the gRPC codec of kvring's servers and clients. It registers
// under gRPC's protobuf name ("proto") and puts the same bytes on the wire as
// gRPC's own codec, which it calls for every message but three wrapper types
// that move a data frame's bytes without the copies protobuf makes:
//
//   - *OutFrame, given to a stream's SendMsg, is encoded as the message whose
//     field Field is the DataFrame{Index, Offset, Data}; with Borrow its
//     bytes go to the transport as they are, otherwise they are copied once
//     into a pooled buffer (protobuf would too).
//   - *EncodedFrame, given to a stream's SendMsg, is such a message encoded
//     already, its bytes filled by the sender: its buffer goes to the
//     transport as it is.
//   - *InFrame, given to a stream's RecvMsg, decodes such a message without
//     copying the frame's bytes: they stay in gRPC's receive buffers, which
//     the InFrame holds until Release. Any other message (and a data frame in
//     a form the fast path does not read) is decoded into InFrame.Msg by
//     protobuf.
//
// A peer that uses gRPC's default codec reads and writes the same messages;
// only the copies differ. Install it with grpc.ForceServerCodecV2 on a server
// and grpc.ForceCodecV2 as a default call option on a client connection;
// nothing is registered globally. Safe for concurrent use.
type Codec struct {
	base encoding.CodecV2
}

// NewCodec returns the codec.
func NewCodec() Codec {
	return Codec{base: encoding.GetCodecV2(grpcproto.Name)}
}

// Name is gRPC's protobuf codec name, so the content-subtype is unchanged.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v: an *OutFrame as its data frame message, an
// *EncodedFrame by handing over its buffer, anything else with gRPC's
// protobuf codec.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	switch f := v.(type) {
	case *OutFrame:
		return f.marshal()
	case *EncodedFrame:
		return f.marshal()
	}
	return c.base.Marshal(v)
}

// Unmarshal decodes data into v: an *InFrame as described on Codec, anything
// else with gRPC's protobuf codec.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if in, ok := v.(*InFrame); ok {
		return in.unmarshal(c.base, data)
	}
	return c.base.Unmarshal(data, v)
}

// Field numbers of the data frame in the messages that carry one
// (TestDataFieldNumbers checks them against the generated code).
const (
	PutDataField     protowire.Number = 2 // PutRequest.data
	PrepareDataField protowire.Number = 2 // PrepareRequest.data
	GetDataField     protowire.Number = 3 // GetResponse.data
	FetchDataField   protowire.Number = 3 // FetchResponse.data
)

// Package transfer moves chunk bytes between processes: it cuts chunks into
// DataFrame messages, reassembles them on the receiving side, checksums them
// in flight, and maps errors to gRPC status codes and back. It never decides
// placement: which node receives which chunk is the caller's (node/) business,
// and nothing here knows the ring.
//
// # Framing
//
//   - A frame carries 1 to MaxFrameBytes (1 MiB) bytes of one chunk. Within a
//     chunk, frames run in offset order from 0 to the chunk's size without gaps
//     or overlaps; a chunk of size 0 has no frames. Frames of different chunks
//     may interleave.
//   - SplitFrames is zero-copy: each frame's Data is a sub-slice of the
//     chunk's bytes. The bytes must not change until the frame has been sent
//     (for a gRPC stream: until Send returns, which marshals the message).
//   - Checksums: a sender verifies a chunk before it sends it (a node's
//     owner checks it as it copies it into EncodedFrames, and sends nothing
//     of a chunk that fails), and the receiver computes the checksum as it
//     copies the frames out (Frame.AppendChecksum, Staged.WriteBuffers), so
//     bytes damaged on the way are never taken for the chunk.
//
// # The codec
//
// Codec (codec.go) is the gRPC codec of kvring's servers and SDK: protobuf on
// the wire, with two wrapper messages for data frames. InFrame (inframe.go)
// receives a frame without copying its bytes out of gRPC's receive buffers,
// which it holds until Release; OutFrame (outframe.go) sends one, copying its
// bytes once or, with Borrow, lending them to gRPC until a Lender hears they
// were written; EncodedFrame (encoded.go) is one encoded ahead, whose bytes
// the sender fills itself and whose buffer gRPC takes. Assembler.AddFrame and BuffersSink take a frame in those
// pieces. A client or server with gRPC's default codec talks to them
// unchanged.
//
// # Reassembly
//
//   - An Assembler receives the frames of one batch of chunks (one Put,
//     Prepare, Get or Fetch stream). It checks every frame against the
//     batch (index in range, offset equal to the bytes received so far, 1 to
//     MaxFrameBytes bytes, not past the chunk's size) and routes its bytes to
//     the Sink the caller registered for that chunk (a *store.Staged, or a
//     sink that forwards to several owners). Frames of chunks that are not
//     needed are discarded unread.
//   - A frame that breaks the rules is an error wrapping ErrBadFrame whose
//     message names the field (data.index, data.offset, data.data); the stream
//     must then fail with InvalidArgument. A stream that ends before every
//     needed chunk is complete is ErrIncompleteStream, naming the short
//     chunks. A Sink's error fails that chunk only.
//   - The Assembler does not verify checksums: the sink does (Staged.Seal), so
//     the bytes are read once.
//
// # Errors on the wire
//
// codes.go holds kvring's one table from domain errors (this package's
// sentinels, store's, and context's) to gRPC codes. The store's sentinels
// that cross the wire are defined in internal/storeerr and re-exported by
// store, so transfer, and the SDK with it, never link the store; the
// checksum is internal/crc32c's, the store's own. ToStatus turns an error
// into a status error for a server to return; FromStatus turns a status
// error back into an error that wraps the matching sentinel, so clients test
// errors with errors.Is as if the call had been local. The sentinel travels
// as a google.rpc.ErrorInfo detail (domain "kvring", reason from the table);
// the message is kept verbatim. No other package imports grpc/status to
// build errors.
//
// Everything here is safe for concurrent use except an Assembler, which
// belongs to the goroutine that receives its stream. Nothing here blocks
// except through the emit functions and Sinks the caller supplies.
package transfer

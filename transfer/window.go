package transfer

// StreamWindow and ConnWindow are the HTTP/2 flow-control windows, per
// stream and per connection, of kvring's gRPC connections: the node's
// server announces them on every connection it accepts (peers' and
// engines'), and the coordinator's dial to its peers and the Go SDK's dial
// announce them too. Setting them turns gRPC's dynamic window sizing off. That sizing
// (bandwidth-delay estimation) makes the receiver of every call that
// carries data send a window update and a ping, which the other end
// answers: on a lookup's path each costs both nodes a wake-up and a write
// (a pinned lookup of a chunk another node holds cost each end 3.4 reads
// and 1.9 writes of its connection per call, now 2 and 1). A stream's
// window is the most dynamic sizing grows one to (16 MiB), so a stream of
// 1 MiB frames is not held back (a fetch of 2 MiB chunks from another node
// ran at 4 MiB slower than before, at 16 MiB as fast); a receiver may hold
// that much of a stream it has not read yet, as it could once the sizing
// had grown the window. Windows are settings each end announces: a node of
// an earlier build, which sizes its own windows, works with either.
const (
	StreamWindow = 16 << 20
	ConnWindow   = 32 << 20
)

// Package owner is a node's side of the Peer service: what a coordinator
// (this node's own, in process, or a peer's, over gRPC) asks of the node that
// owns a chunk. It stages a batch (Prepare), takes its frames straight into
// shared-memory slots, votes, seals on Commit, frees on Abort, answers Has
// (pinning under a lookup lease when asked), serves chunks (Fetch, Send) and
// the namespace records peers exchange.
//
// # What it owns
//
//   - The stage tokens of chunks voted ready and waiting for their commit, and
//     the records of lookup-lease pins, each with the coordinator that granted
//     its lease (ended with CoordinatorGone). The store decides when a stage lease
//     ends, on its clock; Sweep only forgets tokens whose slot the store
//     already freed.
//   - No goroutines and no connections. The bytes it handles belong to the
//     store (slots, Views) or to gRPC (received frames, until copied).
//
// # Contract
//
//   - A token seals only the chunk it was issued for, in its namespace.
//   - Over the Peer service, tokens are kept only once the coordinator has
//     taken the votes: it half-closes the Prepare stream after reading them,
//     and a stream that ends any other way has its ready tokens aborted
//     (nobody else knows them, so nobody would commit or abort them).
//   - A commit is answered "sealed" only once the chunk is readable and in
//     the catalog (group commit).
//   - Bad input is ErrInvalidArgument naming the field; every status error the
//     Service returns is built by transfer.ToStatus.
//
// It must not place chunks, call other nodes or know the ring.
package owner

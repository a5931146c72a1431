// Package sockcoord is the local socket's adapter over the coordinator: it
// implements localsock.Cluster (the socket's kvring extensions: namespace
// registration, lookups, lease releases, publish and get of cluster chunks)
// with calls to coord.Coordinator in process, and copies the chunks a get
// reads into the blobs the socket hands its client (sockSink), verifying
// each one's checksum.
//
// # Why a package of its own
//
// localsock speaks the Vineyard protocol and knows nothing of the
// coordinator: it reaches the cluster only through its Cluster interface,
// so its tests run against fakes and it links neither the coordinator nor
// gRPC. This package is the one place the two meet; the node constructs it
// with the coordinator it wired (New) and passes it to localsock.Config.
//
// # What it must not do
//
//   - Speak the socket's protocol (localsock does), or hold chunk bytes of
//     its own: a read's bytes go straight into the client's blob.
//   - Import gRPC, its codes or its status, or go through the Cache
//     service: every call uses the coordinator's plain API (Register,
//     Lookup, ReleaseLease, Publish, GetChunks), which returns domain errors
//     (transfer.Err*; coord.MissHeader names a miss), and the socket's
//     error replies carry their text.
//   - Own goroutines: every call runs on the socket connection's.
package sockcoord

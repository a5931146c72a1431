// Package client is the Go SDK engines use to talk to a kvring cluster.
//
// New never blocks and never fails because the cluster is down: the client
// connects in the background, reconnects by itself after a loss, logs every
// connection state change once and reports it through State. Right after a
// loss, a call waits for the first attempt to reconnect (at most
// ConnConfig.DialTimeout): a node restarting behind a load balancer costs a
// short wait, not an error. Once an attempt has failed, and while the client
// is not connected, calls fail fast with a gRPC Unavailable error that names
// the cause. Results are honest: a chunk is reported stored only when the cluster
// confirmed that some node holds it, with the holders named; a lookup counts
// only chunks that can be read now; a read whose bytes fail their checksum is
// a miss, never data.
//
// Put and Get send each chunk straight to its primary owner, by a ring view
// the client fetches from the cluster and keeps fresh (Routing), and fall back
// to the connected node when an owner cannot take its share;
// Config.DisableRouting sends everything through the connected node.
//
// Chunk ids are computed with ChunkIDs / NextChunkID (see docs/chunk-id.md for
// the definition and test vectors that other languages can match).
package client

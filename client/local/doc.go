// Package local is the Go client of a kvring node's local Unix socket: the
// Vineyard IPC protocol (blobs in the node's shared memory, written and
// read through mappings of its segment files) and kvring's extensions
// (publish sealed blobs as cluster chunks, look chunks up, get chunks as
// blobs). docs/vineyard.md describes the protocol.
//
// It owns one connection and the mappings of the segments the node passed
// on it: a segment is mapped once, when its descriptor arrives, and
// unmapped by Close; the pages under a new blob are populated once per
// page. A broken connection is dialled again by the next call (the old
// one's blobs and references are gone with it). It must not hide an error
// reply: every call returns the node's code and message as an *Error.
//
// A Client is safe for concurrent use; its calls are serialised on the
// connection (the protocol is strictly one reply per request, in turn) and
// each blocks until its reply arrives or the connection fails, except
// ReleaseLater, which queues a release for the next call's write
// (release.go).
package local

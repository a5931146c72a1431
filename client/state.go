package client

import (
	"fmt"
	"time"
)

// ConnStatus says whether a client is connected to the cluster now.
//
//	Connecting ──▶ Connected ──▶ Reconnecting ──▶ Connected ──▶ …
//	     └────────────┴───────────────┴──────────▶ Closed (terminal)
//
// Connecting is the state from creation until the first connection succeeds; Reconnecting is the state after a
// connection was lost, until one succeeds again. In both, calls fail fast with codes.Unavailable.
type ConnStatus int

const (
	// ConnConnecting: never connected yet; attempts are under way.
	ConnConnecting ConnStatus = iota
	// ConnConnected: a node answered the health check and is watched.
	ConnConnected
	// ConnReconnecting: the connection was lost; attempts are under way.
	ConnReconnecting
	// ConnClosed: the client was closed; nothing runs any more.
	ConnClosed
)

// String returns the lowercase name of the status, e.g. "reconnecting".
func (s ConnStatus) String() string {
	switch s {
	case ConnConnecting:
		return "connecting"
	case ConnConnected:
		return "connected"
	case ConnReconnecting:
		return "reconnecting"
	case ConnClosed:
		return "closed"
	}
	return fmt.Sprintf("ConnStatus(%d)", int(s))
}

// ConnState is a snapshot of a client's connection. It is a value: safe to copy and to keep.
type ConnState struct {
	// Status is the current status.
	Status ConnStatus
	// Addr is the node connected to (Connected), the node being tried or about to be tried (Connecting,
	// Reconnecting), or the last node connected to or tried (Closed).
	Addr string
	// Attempt is the number of the current connection attempt since creation or since the last loss, from 1.
	// It is 0 while Connected.
	Attempt int
	// LastError says why the previous attempt failed, or why the connection was lost, prefixed with the node's
	// address ("10.0.0.7:9600: health check: Unavailable: ... connection refused"). Empty while Connected and
	// before the first attempt has failed.
	LastError string
	// Since is when Status last changed (not when Attempt or Addr last changed).
	Since time.Time
}

// sameAs reports whether s and o describe the same state, ignoring Since.
func (s ConnState) sameAs(o ConnState) bool {
	return s.Status == o.Status && s.Addr == o.Addr && s.Attempt == o.Attempt && s.LastError == o.LastError
}

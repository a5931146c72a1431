// Package chunkcopy names what this node copies to another member with a
// two-phase write of its own: the hand-off (package handoff) and the
// spreading of hot groups (package spread) both give the coordinator
// (package coord) chunks read from this node's store. It is a leaf: it
// imports only the store, so those packages depend on a function that takes
// Chunks, not on the coordinator.
package chunkcopy

import (
	"context"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Chunk is one chunk to copy: its bytes, read from this node's store, and
// its placement key. The caller of a copy owns the View and releases it
// after the copy returns; the copy only reads it.
type Chunk struct {
	View  *store.View
	ID    store.ID
	Place store.ID // its group's key (used when the namespace places chunks by groups)
}

// Spread marks a copy of hot groups that their primary owner spreads to
// Width members, each keeping its copies for TTL (PrepareBegin.spread_width).
// The zero Spread is an ordinary copy.
type Spread struct {
	Width int
	TTL   time.Duration
}

// Func writes chunks (of namespace rec) to member m with a two-phase write
// and returns per chunk nil when this copy was sealed there, or why not:
// store.ErrAlreadyHeld (m held it), store.ErrRejected (m's policy or budget
// declined it), store.ErrBusy (another writer is storing it there), or
// another error. It blocks on the exchange with m.
type Func func(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []Chunk, spread Spread) []error

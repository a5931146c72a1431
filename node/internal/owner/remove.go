package owner

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// Remove deletes the chunks of rawIDs from this node's store and reports,
// per id, whether it removed one, and whether one is held but pinned by a
// lookup lease (it stays until the lease ends; the caller may try again).
// With unpin, pinned chunks are removed too (store.Delete): none is
// reported pinned.
func (o *Owner) Remove(ref *kvringv1.NamespaceRef, rawIDs [][]byte, unpin bool) (removed, pinned []bool, err error) {
	if ref == nil || ref.GetName() == "" {
		return nil, nil, fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument)
	}
	ids, err := ParseIDs(rawIDs, o.cfg.MaxBatch)
	if err != nil {
		return nil, nil, err
	}
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	removed, pinned = make([]bool, len(ids)), make([]bool, len(ids))
	remove := o.st.Evict
	if unpin {
		remove = o.st.Delete
	}
	for i, id := range ids {
		switch err := remove(ns, id); {
		case err == nil:
			removed[i] = true
		case errors.Is(err, store.ErrBusy):
			pinned[i] = true
		case errors.Is(err, store.ErrNotFound):
		default:
			return nil, nil, fmt.Errorf("cannot remove chunk %s of %q: %w", id, ref.GetName(), err)
		}
	}
	return removed, pinned, nil
}

// DropNamespace removes the namespace of ref from this node: its registry
// record and every chunk of it (pinned ones when their pins end). A record
// with another fingerprint is left alone. It reports what it freed, and
// whether the namespace was registered here.
func (o *Owner) DropNamespace(ref *kvringv1.NamespaceRef) (store.NamespaceUsage, bool, error) {
	rec := o.cfg.Registry.Get(ref.GetName())
	if rec == nil || string(rec.GetFingerprint()) != string(ref.GetFingerprint()) {
		return store.NamespaceUsage{}, false, nil
	}
	o.cfg.Registry.Delete(ref.GetName())
	freed, err := o.st.DropNamespace(namespace.StoreName(ref.GetName(), ref.GetFingerprint()))
	if err != nil && !errors.Is(err, store.ErrNotFound) { // ErrNotFound: it never held a chunk here
		return freed, true, fmt.Errorf("cannot drop namespace %q: %w", ref.GetName(), err)
	}
	return freed, true, nil
}

// Remove serves the Peer service's Remove.
func (s *Service) Remove(_ context.Context, req *kvringv1.RemoveRequest) (*kvringv1.RemoveResponse, error) {
	if req.GetDropNamespace() {
		freed, _, err := s.o.DropNamespace(req.GetNamespace())
		if err != nil {
			return nil, transfer.ToStatus(err)
		}
		return &kvringv1.RemoveResponse{Epoch: s.o.Epoch(), Chunks: uint64(freed.Chunks)}, nil
	}
	removed, pinned, err := s.o.Remove(req.GetNamespace(), req.GetIds(), req.GetUnpin())
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return &kvringv1.RemoveResponse{Epoch: s.o.Epoch(), Removed: removed, Pinned: pinned}, nil
}

// maxListKeys bounds one ListKeys page.
const maxListKeys = 10000

// ListKeys serves the Peer service's ListKeys: a page of the names this
// node's store holds (store.Names).
func (s *Service) ListKeys(_ context.Context, req *kvringv1.ListKeysRequest) (*kvringv1.ListKeysResponse, error) {
	names, next, err := s.o.ListKeys(req.GetNamespacePrefix(), req.GetFrom(), int(req.GetCount()))
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return &kvringv1.ListKeysResponse{Epoch: s.o.Epoch(), Names: names, Next: next}, nil
}

// ListKeys returns up to count names of the chunks of namespaces starting
// with prefix whose id is at least from, in id order, and where the next
// page starts (nil after the last).
func (o *Owner) ListKeys(prefix string, from []byte, count int) (names [][]byte, next []byte, err error) {
	if count < 1 || count > maxListKeys || len(from) > store.IDSize {
		return nil, nil, fmt.Errorf("%w: count %d (1 to %d), from of %d bytes (at most %d)",
			transfer.ErrInvalidArgument, count, maxListKeys, len(from), store.IDSize)
	}
	page, more := o.st.Names(prefix, from, count)
	names = make([][]byte, len(page))
	for i, c := range page {
		names[i] = []byte(c.Name)
	}
	if more {
		next = nextID(page[len(page)-1].ID)
	}
	return names, next, nil
}

// nextID is the id after id (id + 1, big-endian), nil after the last.
func nextID(id store.ID) []byte {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i]++; id[i] != 0 {
			return id[:]
		}
	}
	return nil
}

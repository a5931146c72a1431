package owner

import (
	"errors"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// SlotFunc gives chunk i of a batch (store namespace ns, id, checksum crc)
// a slot whose bytes are already in this node's shared memory: a blob of
// the local socket staged in place (store.Blob.StageChunk), complete. nil
// and no error, or store.ErrBlobStaged, mean it has none: the chunk is
// staged as usual and its bytes arrive as frames. Any other error is the
// chunk's vote (already held, busy, rejected, no space, checksum). It is
// called on the goroutine that prepares the batch.
type SlotFunc func(i int, ns string, id store.ID, crc uint32) (*store.Staged, error)

// NewPrepareFrom is NewPrepare for a batch some of whose chunks are already
// in this node's shared memory: slot gives them their slots without a copy.
// Those chunks are among the needed indexes it returns (they are voted on
// and committed like the others, and keep their placement keys like them)
// but need no frames: frames sent for them are discarded unread.
// Chunks that need a slot are charged to client's share of the staged
// bytes (package tenant names clients; "": the node's own work).
//
// It is this node's own coordinator's prepare, never a spread copy:
// Config.Placed is told of what it stages.
func (o *Owner) NewPrepareFrom(client string, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun, slot SlotFunc) (*Prepare, []uint32, []*kvringv1.ChunkVote, error) {
	p, need, votes, err := o.newPrepare(client, ref, chunks, runs, slot)
	if err == nil {
		o.notePlaced(p)
	}
	return p, need, votes, err
}

// slotOf stages chunk i: slot's complete slot when it gives one, else a new
// slot the frames fill.
func (p *Prepare) slotOf(i int, c *kvringv1.ChunkRef, slot SlotFunc) (*store.Staged, error) {
	if slot != nil {
		w, err := slot(i, p.ns, p.ids[i], c.GetCrc32C())
		switch {
		case w != nil && err == nil:
			return w, nil
		case err != nil && !errors.Is(err, store.ErrBlobStaged):
			return nil, err
		}
	}
	return p.st.StageFor(p.client, p.ns, p.ids[i], int64(c.GetSize()), c.GetCrc32C())
}

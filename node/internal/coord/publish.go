package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// Publish runs the two-phase write of a batch whose bytes are already in
// this node's shared memory: blobs[i] (sealed blobs of the local socket,
// borrowed for the call) holds the bytes of begin's chunk i. It is a Put
// without the engine's stream: the same writeTx (placement, prepare with
// substitutes for unreachable owners, vote, commit and results), the same
// limits, metrics and honesty (a chunk no node holds is rejected or
// failed, never stored); only its data phase differs (blobData). When
// this node owns a chunk, the blob's slot becomes the chunk
// (store.Blob.StageChunk: no copy, its checksum checked once); the other
// owners are sent the bytes read from the blob, a frame at a time, under a
// fault guard (a segment truncated by its writer fails the chunk's remote
// shares, not the node). A blob whose slot became a chunk keeps a reader's
// reference to it until freed. Bad input (a blob whose size differs from
// its chunk's) and an unknown namespace are errors of the call. Safe for
// concurrent use; blocks until every owner answered or ctx ends (commits
// run to their own bound).
func (c *Coordinator) Publish(ctx context.Context, begin *kvringv1.PutBegin, blobs []*store.Blob) (epoch uint64, results []*kvringv1.PutChunkResult, err error) {
	defer metrics.ObserveSince(c.m.PutSeconds, time.Now())
	if len(blobs) != len(begin.GetChunks()) {
		return 0, nil, fmt.Errorf("%w: %d blobs for %d chunks", transfer.ErrInvalidArgument, len(blobs), len(begin.GetChunks()))
	}
	for i, ch := range begin.GetChunks() {
		if blobs[i] == nil || blobs[i].Size() != int64(ch.GetSize()) {
			return 0, nil, fmt.Errorf("%w: chunk %d is %d bytes and its blob is not", transfer.ErrInvalidArgument, i, ch.GetSize())
		}
	}
	tx, err := c.newPlacedWrite(begin, &blobData{blobs: blobs})
	if err != nil {
		return 0, nil, err
	}
	settled, err := tx.run(ctx)
	if err != nil {
		return 0, nil, err // blobData.deliver never fails
	}
	results = tx.results()
	c.countPut(results, tx.chunks)
	return c.epoch(), append(settled, results...), nil
}

// blobData is the data phase of a publish: this node's own share stages
// its chunks in their blobs' slots; peers are sent the bytes read from
// the blobs.
type blobData struct {
	blobs []*store.Blob // per batch index
}

// slot gives this node's chunks of share s their blobs' slots, and marks
// those chunks in s as needing no frames.
func (d *blobData) slot(_ *writeTx, s *ownerShare) owner.SlotFunc {
	return func(i int, ns string, id store.ID, crc uint32) (*store.Staged, error) {
		if i >= len(s.toBatch) {
			return nil, nil
		}
		w, err := d.blobs[s.toBatch[i]].StageChunk(ns, id, crc)
		if err == nil {
			s.inPlace[uint32(i)] = true
		}
		return w, err
	}
}

// deliver sends the bytes of every needed chunk from its blob to the
// owners that need them, one frame at a time, each read under a fault
// guard: a fault fails the chunk's shares that were still being sent.
func (d *blobData) deliver(_ context.Context, tx *writeTx, settled []*kvringv1.PutChunkResult) error {
	tx.c.countPut(settled, tx.chunks)
	for _, idx := range tx.need {
		sink := tx.sinks[idx]
		if !sink.wantsBytes() {
			continue // only this node needs it: its slot is the blob's
		}
		err := d.blobs[idx].Read(func(data []byte) { sink.writeChunk(data) })
		if err != nil {
			for _, s := range sink.shares {
				s.fail(fmt.Errorf("cannot read the chunk's blob: %w", err))
			}
		}
	}
	return nil
}

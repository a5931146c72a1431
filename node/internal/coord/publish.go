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
// without the engine's stream: the same placement, prepare (with
// substitutes for unreachable owners), vote, commit and results, the same
// limits, metrics and honesty (a chunk no node holds is rejected or
// failed, never stored). When this node owns a chunk, the blob's slot
// becomes the chunk (store.Blob.StageChunk: no copy, its checksum checked
// once); the other owners are sent the bytes read from the blob, a frame at
// a time, under a fault guard (a segment truncated by its writer fails the
// chunk's remote shares, not the node). A blob whose slot became a chunk
// keeps a reader's reference to it until freed. Bad input (a blob whose
// size differs from its chunk's) and an unknown namespace are errors of
// the call. Safe for concurrent use; blocks until every owner answered or
// ctx ends (commits run to their own bound).
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
	tx, err := c.newPutTx(begin)
	if err != nil {
		return 0, nil, err
	}
	tx.blobs = blobs
	if err := tx.place(); err != nil {
		return 0, nil, err
	}
	defer tx.closeSessions()
	tx.prepare(ctx)
	tx.substitute(ctx, tx.ring)
	settled := tx.plan()
	c.countPut(settled, tx.chunks)
	tx.sendBlobs()
	tx.vote()
	tx.commit(ctx)
	tx.noteOutcomes(ctx)
	c.awaitOtherWriters(ctx, tx.ref, tx.shares)
	results = tx.results()
	c.countPut(results, tx.chunks)
	return c.epoch(), append(settled, results...), nil
}

// session opens the put session of s's owner: for this node during a
// publish, one that stages the chunks in their blobs' slots.
func (tx *putTx) session(s *ownerShare) (putSession, error) {
	if tx.blobs == nil || s.remote {
		return tx.c.session(s.member)
	}
	bs := &blobSession{localSession: localSession{o: tx.c.local}, slotted: map[uint32]bool{}}
	bs.slot = func(i int, ns string, id store.ID, crc uint32) (*store.Staged, error) {
		if i >= len(s.toBatch) {
			return nil, nil
		}
		w, err := tx.blobs[s.toBatch[i]].StageChunk(ns, id, crc)
		if err == nil {
			bs.slotted[uint32(i)] = true
		}
		return w, err
	}
	return bs, nil
}

// blobSession is this node's own owner preparing chunks whose bytes are in
// blobs: their slots become the chunks, so the frames sent to it are
// discarded unread.
type blobSession struct {
	localSession
	slot    owner.SlotFunc
	slotted map[uint32]bool // share indexes whose slot is their blob's
}

func (s *blobSession) begin(_ context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) ([]uint32, []*kvringv1.ChunkVote, error) {
	p, need, votes, err := s.o.NewPrepareFrom(ref, chunks, runs, s.slot)
	s.p = p
	return need, votes, err
}

// sendBlobs sends the bytes of every needed chunk from its blob to the
// owners that need them, one frame at a time, each read under a fault
// guard: a fault fails the chunk's shares that were still being sent.
func (tx *putTx) sendBlobs() {
	for _, idx := range tx.need {
		sink := tx.sinks[idx]
		if !sink.wantsBytes() {
			continue // only this node needs it: its slot is the blob's
		}
		b := tx.blobs[idx]
		err := b.Read(func(data []byte) {
			for off := 0; off < len(data); off += transfer.MaxFrameBytes {
				_, _ = sink.WriteBuffers([][]byte{data[off:min(off+transfer.MaxFrameBytes, len(data))]})
			}
		})
		if err != nil {
			for _, s := range sink.shares {
				s.fail(fmt.Errorf("cannot read the chunk's blob: %w", err))
			}
		}
	}
}

// wantsBytes reports whether a share the sink feeds needs frames: a
// peer's, or this node's when the chunk's slot is not its blob's (a blob
// published before).
func (s *fanoutSink) wantsBytes() bool {
	for _, sh := range s.shares {
		bs, ok := sh.sess.(*blobSession)
		if !ok || !bs.slotted[sh.toShare[s.index]] {
			return true
		}
	}
	return false
}

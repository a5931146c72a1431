package store

import (
	"fmt"
	"os"
)

// Stats is a snapshot of the store's accounting. Byte counts are exact at the
// moment of the snapshot; ResidentBytes is what the kernel reports.
type Stats struct {
	NodeID string `json:"node_id"`
	// LimitBytes is the memory budget; UsedBytes the slot bytes of staged,
	// sealed and dying chunks (payload plus allocator waste), never above it.
	LimitBytes int64 `json:"limit_bytes"`
	UsedBytes  int64 `json:"used_bytes"`
	// Chunks and PayloadBytes count sealed (readable) chunks.
	Chunks       int64 `json:"chunks"`
	PayloadBytes int64 `json:"payload_bytes"`
	// StagedChunks and StagedBytes count staged writes (payload bytes).
	StagedChunks int64 `json:"staged_chunks"`
	StagedBytes  int64 `json:"staged_bytes"`
	// Blobs and BlobBytes count blobs of the local socket (CreateBlob) and
	// their payload bytes; their slots are part of UsedBytes.
	Blobs     int64 `json:"blobs"`
	BlobBytes int64 `json:"blob_bytes"`
	// PinnedChunks counts sealed chunks pinned by a pin lease (Has).
	PinnedChunks int64 `json:"pinned_chunks"`
	// PinnedBytes is the slot bytes of chunks held by pins (also chunks
	// dropped while pinned, until their pins end); PinLimitBytes is
	// Config.MaxPinnedBytes, the most PinnedBytes may reach.
	PinnedBytes   int64 `json:"pinned_bytes"`
	PinLimitBytes int64 `json:"pin_limit_bytes"`
	// RetainedFreeBytes are free slots whose pages are still resident, kept
	// for reuse; UsedBytes + RetainedFreeBytes stays within the limit.
	RetainedFreeBytes int64 `json:"retained_free_bytes"`
	// ResidentBytes is the memory the kernel has allocated to the segments.
	ResidentBytes int64 `json:"resident_bytes"`
	// SlotsReused counts slots handed out (to chunks and blobs) whose pages
	// were resident: a free slot of the same size class. SlotsFresh counts
	// those handed out clean, whose pages the kernel allocates and zeroes
	// first. PunchedBytes is the slot bytes of retained free slots whose
	// pages were given back to make room for other slots.
	SlotsReused  uint64 `json:"slots_reused"`
	SlotsFresh   uint64 `json:"slots_fresh"`
	PunchedBytes int64  `json:"punched_bytes"`
	Segments     int    `json:"segments"`
	// Evictions and Rejections count by reason (Reason* constants).
	Evictions  map[string]uint64 `json:"evictions"`
	Rejections map[string]uint64 `json:"rejections"`
	// ChecksumErrors counts reads whose bytes failed their checksum.
	ChecksumErrors uint64 `json:"checksum_errors"`
	// StageExpired counts staged writes freed because their lease ran out.
	StageExpired uint64 `json:"stage_expired"`
	Stages       uint64 `json:"stages"`
	Seals        uint64 `json:"seals"`
	Gets         uint64 `json:"gets"`
	Hits         uint64 `json:"hits"`
	// SegmentsLost counts segment files found deleted or truncated under the
	// running store (see ErrSegmentLost).
	SegmentsLost uint64 `json:"segments_lost"`
	// CatalogErrors counts failed catalog writes (each is retried; Health
	// reports the catalog until one succeeds).
	CatalogErrors uint64 `json:"catalog_errors"`
	// LowerHits counts reads (part of Hits) served by the Lower tier;
	// Promotions the chunks copied back from it into shared memory.
	LowerHits  uint64 `json:"lower_hits"`
	Promotions uint64 `json:"promotions"`
	// SegmentPathsSkipped counts segment ids skipped because a file the
	// store did not create was at their path (each is logged).
	SegmentPathsSkipped uint64 `json:"segment_paths_skipped"`
}

// WasteBytes is allocator waste: slot bytes not holding payload.
func (st Stats) WasteBytes() int64 {
	return st.UsedBytes - st.PayloadBytes - st.StagedBytes - st.BlobBytes
}

// Stats returns a snapshot of the accounting. It takes the store's lock
// briefly and asks the kernel about each segment.
func (s *Store) Stats() Stats {
	if s.enter() {
		defer s.exit()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		NodeID:              s.nodeID,
		LimitBytes:          s.cfg.MemoryLimit,
		UsedBytes:           s.arena.used,
		Chunks:              s.st.chunks,
		PayloadBytes:        s.st.payloadBytes,
		StagedChunks:        s.st.stagedChunks,
		StagedBytes:         s.st.stagedBytes,
		Blobs:               s.blobs.count,
		BlobBytes:           s.blobs.bytes,
		PinnedChunks:        s.st.pinnedChunks,
		PinnedBytes:         s.st.pinnedBytes,
		PinLimitBytes:       s.cfg.MaxPinnedBytes,
		RetainedFreeBytes:   s.arena.dirtyFree,
		Segments:            len(s.arena.segs),
		SlotsReused:         s.arena.counts.reused,
		SlotsFresh:          s.arena.counts.fresh,
		PunchedBytes:        s.arena.counts.punched,
		Evictions:           make(map[string]uint64, len(s.st.evictions)),
		Rejections:          make(map[string]uint64, len(s.st.rejections)),
		ChecksumErrors:      s.st.checksumErrs,
		StageExpired:        s.st.stageExpired,
		Stages:              s.st.stages,
		Seals:               s.st.seals,
		Gets:                s.st.gets,
		Hits:                s.st.hits,
		CatalogErrors:       s.cat.failures.Load(),
		SegmentsLost:        s.st.segmentsLost,
		SegmentPathsSkipped: s.arena.counts.skipped,
		LowerHits:           s.st.lowerHits,
		Promotions:          s.st.promotions,
	}
	if !s.closed {
		st.ResidentBytes = s.arena.residentBytes()
	}
	for k, v := range s.st.evictions {
		st.Evictions[k] = v
	}
	for k, v := range s.st.rejections {
		st.Rejections[k] = v
	}
	return st
}

// segmentFile returns a duplicate of the segment's file descriptor, for
// passing to a process on the same host, and the file's length (the
// map_size of docs/vineyard-protocol.md). The caller owns and must close the
// returned file. It stays unexported until the local socket hands segments
// out; tests call it.
func (s *Store) segmentFile(id uint32) (*os.File, int64, error) {
	if !s.enter() {
		return nil, 0, ErrClosed
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	seg := s.arena.segs[id]
	if seg == nil || s.closed {
		return nil, 0, fmt.Errorf("segment %d: %w", id, ErrNotFound)
	}
	fd, err := dupFD(seg.file)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot duplicate segment %d: %w", id, err)
	}
	return fd, segmentFileSize(seg.slotSize, seg.nslots), nil
}

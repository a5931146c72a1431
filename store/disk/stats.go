package disk

// Reasons an offload was dropped, the keys of Stats.Drops.
const (
	DropQueueFull  = "queue_full" // the write queue held QueueBytes: the disk is slower than evictions
	DropDegraded   = "degraded"   // the tier had stopped offloading after a failure
	DropTooLarge   = "too_large"  // the chunk does not fit a region
	DropUnreadable = "unreadable" // its bytes could not be read from shared memory, or failed their checksum
	DropIOError    = "io_error"   // its write failed (full disk, I/O error, directory gone)
	DropPinned     = "pinned"     // no region could be evicted: lookup leases pin them all
)

// counters are the tier's running totals, guarded by Tier.mu.
type counters struct {
	queuedTotal, offloads, already      uint64
	reinserted                          uint64
	writeBytes, readBytes               int64
	reads, hits, queueHits              uint64
	checksumErrors, readErrors          uint64
	regionsCreated, regionsEvicted      uint64
	regionsGivenUp                      uint64
	sealed, chunksEvicted, degradations uint64
	drops                               map[string]uint64
}

func newCounters() counters { return counters{drops: make(map[string]uint64)} }

// Stats is a snapshot of the tier's accounting.
type Stats struct {
	Dir        string `json:"dir"`
	DirectIO   bool   `json:"direct_io"`
	LimitBytes int64  `json:"limit_bytes"`
	// UsedBytes is the space of the region files (whole regions).
	UsedBytes   int64 `json:"used_bytes"`
	RegionBytes int64 `json:"region_bytes"`
	Regions     int   `json:"regions"`
	// Chunks and PayloadBytes count the chunks held on disk; QueuedChunks
	// and QueuedBytes those copied out of memory and waiting for the
	// writer (also held).
	Chunks       int64 `json:"chunks"`
	PayloadBytes int64 `json:"payload_bytes"`
	QueuedChunks int64 `json:"queued_chunks"`
	QueuedBytes  int64 `json:"queued_bytes"`
	// Offloads counts records written; AlreadyHeld offloads of chunks
	// the tier held already (nothing written); Drops offloads given up, by
	// reason (Drop* constants).
	Offloads    uint64 `json:"offloads"`
	AlreadyHeld uint64 `json:"already_held"`
	// Reinserted counts chunks of evicted regions written again because
	// they were read since their last write (their second chance).
	Reinserted uint64            `json:"reinserted"`
	Drops      map[string]uint64 `json:"drops"`
	WriteBytes int64             `json:"write_bytes"`
	// Reads counts Read calls; Hits those served (QueueHits from the
	// queue); ReadBytes the bytes read from disk.
	Reads     uint64 `json:"reads"`
	Hits      uint64 `json:"hits"`
	QueueHits uint64 `json:"queue_hits"`
	ReadBytes int64  `json:"read_bytes"`
	// ChecksumErrors counts records that did not decode or match their
	// checksum, ReadErrors reads that failed (I/O error, truncated file):
	// each was a miss and its chunk dropped.
	ChecksumErrors uint64 `json:"checksum_errors"`
	ReadErrors     uint64 `json:"read_errors"`
	RegionsEvicted uint64 `json:"regions_evicted"`
	// RegionsGivenUp counts the evicted regions that went because the
	// filesystem had no room for a new one (it holds less than Limit).
	RegionsGivenUp uint64 `json:"regions_given_up"`
	ChunksEvicted  uint64 `json:"chunks_evicted"`
	// Degraded says why offloads stopped ("" while they go on).
	Degraded     string `json:"degraded,omitempty"`
	Degradations uint64 `json:"degradations"`
	// IndexBytesPerChunk is the measured cost of the in-memory index
	// (docs/disk-tier.md); a constant, for dashboards.
	IndexBytesPerChunk int `json:"index_bytes_per_chunk"`
}

// indexBytesPerChunk is what TestIndexCostPerChunk measured at a million
// chunks: a map slot (8-byte key, 16-byte loc) with Go's map overhead,
// plus the region's key list entry (8 bytes) with its slice's growth
// slack. Between growth steps of the map it is less.
const indexBytesPerChunk = 61

// Stats returns a snapshot. Takes the tier's mutex briefly; never blocks
// on I/O.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Stats{
		Dir: t.cfg.Dir, DirectIO: t.direct, LimitBytes: t.cfg.Limit, RegionBytes: t.cfg.RegionSize,
		UsedBytes: int64(len(t.order)) * t.cfg.RegionSize, Regions: len(t.order),
		Chunks: int64(len(t.idx)), PayloadBytes: t.bytes,
		QueuedChunks: int64(len(t.pending)), QueuedBytes: t.queued,
		Offloads: t.st.offloads, AlreadyHeld: t.st.already, Reinserted: t.st.reinserted, Drops: make(map[string]uint64, len(t.st.drops)),
		WriteBytes: t.st.writeBytes, Reads: t.st.reads, Hits: t.st.hits, QueueHits: t.st.queueHits,
		ReadBytes: t.st.readBytes, ChecksumErrors: t.st.checksumErrors, ReadErrors: t.st.readErrors,
		RegionsEvicted: t.st.regionsEvicted, ChunksEvicted: t.st.chunksEvicted, RegionsGivenUp: t.st.regionsGivenUp,
		Degradations: t.st.degradations, IndexBytesPerChunk: indexBytesPerChunk,
	}
	for k, v := range t.st.drops {
		s.Drops[k] = v
	}
	if t.degraded != nil {
		s.Degraded = t.degraded.Error()
	}
	return s
}

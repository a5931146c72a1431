// Package disk is kvring's disk tier: a second tier under the shared-memory
// store, on a local filesystem, for the chunks that DRAM evicts.
//
// It lives under store/ because it is part of the node-local tier and
// implements store.Lower, the store's one hook for it; it imports store
// only for the chunk id, the sentinel errors and that interface, and the
// store does not import it (node/ wires the two).
//
// # What it owns
//
//   - Region files region-<seq>.kvr under Config.Dir, RegionSize each
//     (default 64 MiB), written sequentially by one writer goroutine (a
//     second, the syncer, fdatasyncs each sealed region meanwhile; Close
//     waits for both) and never rewritten: records (a header naming the chunk in full, its
//     payload, padding to 4 KiB) back to back, then, when the region is
//     full or the tier closes, a footer repeating every record header and
//     a trailer in the last block saying where the footer is (format.go).
//   - Direct I/O: files are opened O_DIRECT and every buffer is 4 KiB
//     aligned, so the page cache holds no second copy of the cache and the
//     disk sees writes as large as the batches (up to 8 MiB, one pwritev).
//     A filesystem that refuses O_DIRECT (tmpfs) gets buffered I/O with a
//     warning (Config.DirectIO). Plain pread/pwritev, not io_uring: at
//     256 KiB to 2 MiB per I/O a syscall costs well under 1 % of the
//     transfer, concurrency comes from the readers' own goroutines, and
//     the module proxy serves no io_uring binding this project could vet
//     (docs/disk-tier.md).
//   - A bounded write queue (Config.QueueBytes): Offload copies the chunk
//     out of shared memory into an aligned buffer and returns; when the
//     queue is full, the tier degraded or the chunk too large it drops the
//     offload and counts it (Stats.Drops). It never waits for the disk.
//     A queued chunk is held: Contains counts it and Read serves it from
//     the queue's copy until it is on disk.
//   - The in-memory index: a map from a 64-bit hash of (namespace, id) to
//     16 bytes of location, plus 8 bytes per chunk in its region's key
//     list (61 bytes a chunk with Go's map overhead, measured by
//     TestIndexCostPerChunk). The record header names the chunk in full,
//     so a hash collision is a miss, never another chunk's bytes.
//   - Eviction by whole regions, oldest first by write order, skipping
//     regions a lookup lease pins (Pin): the file is removed and its
//     chunks leave the index, except those read since they were written,
//     which the writer reads back and queues again first (reinsertion: a
//     second chance per read, as a CLOCK gives; one bit per chunk in its
//     index entry). A chunk offloaded again while the tier holds it is not
//     written again.
//   - Checksums: every Read verifies the record header, and the payload's
//     CRC-32C (internal/crc32c) itself with verify or else through its
//     caller, who checks the bytes as it copies them and reports a
//     mismatch (LowerChunk.Corrupt). A mismatch, an I/O error or a
//     truncated file is a miss: the chunk is dropped from the index and
//     counted (Stats.ChecksumErrors, Stats.ReadErrors), never returned.
//   - Recovery (Open): sealed regions are indexed from their footers, the
//     region a killed process was writing is scanned header by header;
//     payloads are verified lazily, by the read that serves them. A clean
//     Close writes the queue out and seals the active region.
//   - Faults: a write that fails (a full disk, an I/O error, the directory
//     deleted) degrades the tier: offloads are dropped (counted) for
//     Config.RetryAfter, then tried again; Health reports ErrDegraded with
//     the cause, and what the tier holds is still served.
//
// # What it must not do
//
// Know about shared memory, the network or the ring; block a caller on
// the disk except in Read (one pread) and Open/Close; return bytes that
// did not match their checksum; hold its mutex during I/O.
//
// All methods of Tier are safe for concurrent use.
package disk

// Package store is kvring's node-local tier: the memory in which every chunk a
// node holds lives.
//
// # Contract
//
//   - Chunk bytes live in shared-memory segments: files in the node's own
//     directory under Config.ShmDir (normally /dev/shm), named
//     kvring-<node id>/kvring-<node id>-<n>.seg and mapped MAP_SHARED, so a
//     segment can be handed to another process as a file descriptor
//     (SegmentFile does that, for the local socket). A chunk's
//     (segment, offset) never moves while the chunk is held, and every segment
//     file is at least 8 bytes longer than the last byte of any slot in it (the
//     mmap rule of docs/vineyard-protocol.md).
//   - Writes are two-phase: Stage reserves a slot and returns a Staged handle the
//     caller fills (Write copies and checksums in one pass; Bytes lets a local
//     writer fill the slot directly). Seal verifies the CRC-32C checksum and
//     publishes the chunk in the authoritative index: from then on it is
//     readable. Abort frees the slot. The store alone owns stage leases: a
//     staged slot that is neither sealed nor aborted within Config.StageLease
//     of its Stage, on the Config.Now clock, is freed by ExpireNow (which the
//     background loop calls), and its Seal reports ErrLeaseExpired.
//   - The authoritative index alone says what is held. The eviction policy
//     (Config.Policy: PolicyLRU, the default, or ristretto's TinyLFU admission
//     with sampled-LFU eviction; cost = slot bytes) decides what stays: a
//     chunk is offered to it at Stage (which waits for the decision only when
//     the budget has no room for the new slot, since the policy must then
//     evict to make room), and Seal collects the decision before publishing,
//     so a write the policy declines is reported ErrRejected, never stored. A chunk the policy turns
//     out not to know is dropped like an eviction.
//   - The memory limit is a hard budget for slot bytes (payload plus allocator
//     waste) of staged and sealed chunks. Freed slots keep their pages for
//     reuse by the next chunk of the same size class; when a new slot would push
//     slot bytes plus such retained free pages over the limit, retained pages
//     are returned to the kernel first (hole punching), so the shared memory
//     the node occupies stays within the limit. Stats counts the slots handed
//     out reused (SlotsReused) and clean (SlotsFresh: pages the kernel
//     allocates and zeroes first) and the bytes punched (PunchedBytes).
//   - Eviction frees a slot exactly once and never under a reader: a View holds
//     a reference, a pin lease (Has) holds a pin, a writer filling a slot through
//     Staged.Bytes holds it until Seal or Abort. PolicyLRU never evicts a
//     pinned chunk: it evicts the oldest unpinned ones, counts only those,
//     and evicts nothing when pins leave no room (the write is then
//     ErrNoSpace). Ristretto may choose a pinned chunk; such a chunk stays
//     readable until its pins end, then is freed. Pins hold at most
//     Config.MaxPinnedBytes (default half the limit): a Has that would pin
//     more is refused with ErrPinLimit, so pins cannot freeze the budget.
//   - StageFor and HasFor charge a named client its share of the staged and
//     pinned bytes (client_shares.go, package fairshare's rule: three quarters to a
//     client alone, a quarter always free for another), and bound how long
//     one client keeps one chunk pinned without a break (MaxPinHold). The
//     store does not know who clients are: the caller names them ("" is
//     the node's own work, charged to no share).
//   - Blobs (CreateBlob, blob.go) are slots outside the index and the policy,
//     for the local socket's Vineyard blobs: they count in the budget until
//     Free, are never evicted, and are forgotten by a restart. SegmentFile
//     hands out a duplicate descriptor of the segment that holds one.
//     Blob.StageChunk turns a blob's slot into a staged chunk without a copy
//     (its checksum checked, its bytes moved from blob to chunk accounting;
//     the blob keeps a reader's reference to the chunk). Lend hands a sealed
//     chunk to such a process without Get's checksum pass.
//   - Get verifies the checksum; a mismatch is reported (ErrChecksum), counted
//     and the chunk dropped.
//   - The shm filesystem must be able to hold the budget: Open refuses
//     (ErrInvalid) a MemoryLimit larger than the filesystem of ShmDir unless
//     Config.AllowShmOvercommit is set, and warns when its free space is
//     smaller. Stage allocates the filesystem space under the slot
//     (fallocate) before a byte is written, so a full filesystem is
//     ErrNoSpace at Stage, not a SIGBUS in the copy. A fault of mapped
//     memory during the store's own copies and checksums (Write, Seal,
//     Check, Get, recovery) is an error wrapping ErrFault, never a crash;
//     callers reading View.Bytes or filling Staged.Bytes touch the mapping
//     themselves and are not covered unless they do it through View.Read,
//     Blob.Read or Guarded.
//   - A segment file deleted or truncated under the running store is found
//     at Seal (one fstat), by a fault, or by the background check: it is
//     marked lost, no slot is allocated in it any more, a chunk sealed into
//     it is refused (ErrSegmentLost; a retry lands in a new segment), and
//     Health reports ErrSegmentLost while it still holds chunks (which a
//     restart would not serve). Stats.SegmentsLost counts such files.
//   - Close waits for calls in flight; later calls return ErrClosed (those
//     that return no error report false or nothing).
//   - The checksum (Checksum, UpdateChecksum, CopyChecksum) is package
//     internal/crc32c's, and the sentinels that cross the wire (ErrNotFound
//     ... ErrClosed, all but ErrFault, ErrInUse and ErrCatalog) are defined
//     in internal/storeerr; the store's are the same functions and values.
//     transfer and the SDK use those leaves and never import this package.
//   - bbolt (Config.DataDir/catalog.db) keeps the node identity, the
//     catalog of sealed chunks and the caller's namespace records
//     (SaveNamespaceRecord: opaque bytes by name, written like chunk
//     records, kept when the chunks are discarded; a host that crashes may
//     lose the last ones, as it loses the chunks). Opening a store on the
//     same data directory re-maps the segments, verifies every chunk's
//     checksum and serves them again; a catalog whose segments are gone
//     (host reboot) is discarded with a log line. Catalog writes are batched,
//     appended to a journal file beside the catalog (catalog.journal-<n>,
//     folded into bbolt every 4 MiB in the background and replayed by Open
//     after a crash) and written without fsync: the catalog is only useful while the shared memory survives, which means the
//     host did not reboot, which means the page cache did not lose the writes.
//     So a sealed chunk is readable at once and survives a restart of the
//     process once its record is written: by FlushCatalog (the owner calls
//     it before it answers a commit), or by the background loop within
//     catalogDelay of the seal while the catalog can be written; Open and
//     Close write the catalog too. A write that fails keeps its
//     changes queued and is retried with backoff; Stats.CatalogErrors counts
//     the failures and Health reports ErrCatalog until a write succeeds, so
//     the node can stop calling itself ready meanwhile. A catalog that
//     cannot be read (bbolt calls it invalid, panics or faults on it) does
//     not stop the start: it is moved aside to catalog.db.corrupt-<unix>,
//     one error line names it, and the store starts cold (keeping the node
//     identity when its record is still readable). A malformed record is
//     dropped on its own with a log line.
//
// All methods of Store are safe for concurrent use. A Staged handle belongs to
// one goroutine; a View may be read from many goroutines until it is released.
package store

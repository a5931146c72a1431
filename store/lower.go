package store

// Lower is a slower tier under the shared memory (the disk tier,
// store/disk): it keeps what the eviction policy evicts, and the store asks
// it for what its own index lacks, so a chunk it holds is held by the
// store: Has, Contains, Get, Lend, Held, Evict and DropNamespace see it.
// Set it in Config.Lower; the caller opens it before the store and closes
// it after. The store calls every method without holding its mutex except
// Contains and Pin, which must not block (they take the tier's own lock
// briefly); a Lower never calls the store.
type Lower interface {
	// Offload takes a chunk the policy evicts. fill copies the chunk's
	// bytes into dst (size bytes, owned by the tier) and returns an error
	// when they cannot be read or do not match crc. meta is the chunk's
	// placement key and name (copied). It returns whether the tier holds
	// the chunk now. It must not block on I/O: a tier that cannot keep up
	// drops the offload.
	Offload(ns string, id ID, crc uint32, size int, meta []byte, fill func(dst []byte) error) bool
	// Contains reports whether the tier holds the chunk.
	Contains(ns string, id ID) bool
	// Pin is Contains that also keeps the chunk from being evicted until
	// the unix-nanosecond time until, as far as the tier can.
	Pin(ns string, id ID, until int64) bool
	// Read returns the chunk's verified bytes (ErrNotFound when not held,
	// ErrChecksum when they cannot be read or fail their checksum: the
	// tier drops it). The caller calls Release once and then no longer
	// touches Bytes.
	Read(ns string, id ID) (LowerChunk, error)
	// Remove drops the chunk and reports whether the tier held it.
	Remove(ns string, id ID) bool
	// DropNamespace drops every chunk of ns.
	DropNamespace(ns string) (chunks, bytes int64)
	// Held calls f for every chunk the tier holds; meta is valid during
	// the call.
	Held(f func(ns string, id ID, size int64, meta []byte))
}

// LowerChunk is a chunk read from a Lower tier.
type LowerChunk struct {
	Bytes []byte // the payload, owned by the tier until Release
	CRC   uint32
	Meta  []byte // what Offload was given
	// Hot reports a chunk read from the tier recently before: the store
	// promotes it back into shared memory.
	Hot     bool
	Release func()
}

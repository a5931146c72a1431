package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// A store whose budget is full of unpinned chunks makes room for every new
// write, however many writers race: the policy must not count room as made
// before the chunks it chose are gone, or a concurrent writer is refused
// with ErrNoSpace while nothing is pinned (seen as redis-benchmark SETs
// answered -OOM on a full node, and as gRPC puts rejected "no space").
func TestConcurrentWritesIntoAFullBudgetAreNeverRefused(t *testing.T) {
	const size = 32 << 10
	s := openTest(t, testConfig(t, 256*size))
	var next atomic.Uint64
	runWorkers(t, 16, 128, func(*rand.Rand) error {
		n := next.Add(1)
		id := testID(n)
		// ErrRejected is an honest answer: a chunk still being written
		// after a whole budget's turnover is evicted.
		err := putViaBlobOrStage(s, id, size, n%2 == 0)
		if errors.Is(err, ErrRejected) {
			return nil
		}
		return err
	})
}

// putViaBlobOrStage writes a chunk as a blob staged as a chunk (the
// Redis-protocol and local-socket path) or through Stage (gRPC).
func putViaBlobOrStage(s *Store, id ID, size int, blob bool) error {
	data := payload(id, size)
	var w *Staged
	if blob {
		b, err := s.CreateBlob(int64(size))
		if err != nil {
			return fmt.Errorf("CreateBlob %s: %w", id, err)
		}
		defer b.Free()
		copy(b.Bytes(), data)
		if w, err = b.StageChunk("ns", id, Checksum(data)); err != nil {
			return fmt.Errorf("StageChunk %s: %w", id, err)
		}
	} else {
		var err error
		if w, err = s.Stage("ns", id, int64(size), Checksum(data)); err != nil {
			return fmt.Errorf("Stage %s: %w", id, err)
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("Write %s: %w", id, err)
		}
	}
	if err := w.Seal(); err != nil {
		return fmt.Errorf("Seal %s: %w", id, err)
	}
	return nil
}

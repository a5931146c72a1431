package loadtest

import (
	"container/list"
	"context"
	"sync"
)

// Memory is an in-process Backend: a map of chunks with an LRU bound on their
// number. Lookup does not change recency; Get of a held chunk and Put of a
// held or new chunk make it the most recently used, so one engine replaying a
// trace at one chunk per block drives it exactly like trace.LRU.
//
// Several Runner engines may share one Memory: it is safe for concurrent use.
// Its methods do not block beyond a mutex.
type Memory struct {
	mu        sync.Mutex
	capacity  int // chunks; 0 means unbounded
	items     map[ChunkID]*list.Element
	order     *list.List // of *memChunk, most recently used first
	evictions uint64
}

type memChunk struct {
	id   ChunkID
	data []byte
}

// NewMemory returns an empty Memory holding at most capacity chunks; capacity
// <= 0 means unbounded.
func NewMemory(capacity int) *Memory {
	return &Memory{capacity: max(capacity, 0), items: make(map[ChunkID]*list.Element), order: list.New()}
}

// Lookup implements Backend.
func (m *Memory) Lookup(_ context.Context, ids, _ []ChunkID) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, id := range ids {
		if _, ok := m.items[id]; !ok {
			return i, nil
		}
	}
	return len(ids), nil
}

// Get implements Backend. The returned bytes are a copy.
func (m *Memory) Get(_ context.Context, ids, _ []ChunkID) ([]GetOutcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GetOutcome, len(ids))
	for i, id := range ids {
		if e, ok := m.items[id]; ok {
			m.order.MoveToFront(e)
			out[i] = GetOutcome{Found: true, Data: append([]byte(nil), e.Value.(*memChunk).data...)}
		}
	}
	return out, nil
}

// Put implements Backend. It copies each chunk's bytes.
func (m *Memory) Put(_ context.Context, chunks []Chunk) ([]PutOutcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PutOutcome, len(chunks))
	for i, c := range chunks {
		if e, ok := m.items[c.ID]; ok {
			m.order.MoveToFront(e)
			out[i] = AlreadyHeld
			continue
		}
		if m.capacity > 0 && len(m.items) >= m.capacity {
			last := m.order.Back()
			m.order.Remove(last)
			delete(m.items, last.Value.(*memChunk).id)
			m.evictions++
		}
		m.items[c.ID] = m.order.PushFront(&memChunk{id: c.ID, data: append([]byte(nil), c.Data...)})
		out[i] = Stored
	}
	return out, nil
}

// Evictions returns how many chunks the LRU bound has evicted so far.
func (m *Memory) Evictions() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evictions
}

// Close implements Backend; it keeps the chunks, so engines sharing a Memory
// may close it in any order.
func (m *Memory) Close() error { return nil }

package coord_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// recordSink is a ChunkSink that keeps what it is given, checking that
// each chunk's bytes come in order; failAt makes Found of that index fail.
type recordSink struct {
	found  map[uint32]*kvringv1.ChunkHeader
	data   map[uint32][]byte
	miss   map[uint32]error
	failAt int
}

func newRecordSink() *recordSink {
	return &recordSink{found: map[uint32]*kvringv1.ChunkHeader{}, data: map[uint32][]byte{}, miss: map[uint32]error{}, failAt: -1}
}

var errSinkGone = errors.New("the reader went away")

func (s *recordSink) Found(h *kvringv1.ChunkHeader) error {
	if int(h.GetIndex()) == s.failAt {
		return errSinkGone
	}
	s.found[h.GetIndex()] = h
	return nil
}

func (s *recordSink) Data(i uint32, off uint64, b []byte) error {
	if s.found[i] == nil || off != uint64(len(s.data[i])) {
		return fmt.Errorf("bytes of chunk %d at offset %d, after %d bytes", i, off, len(s.data[i]))
	}
	s.data[i] = append(s.data[i], b...) // b is lent: copied
	return nil
}

func (s *recordSink) Miss(i uint32, err error) error {
	s.miss[i] = err
	return nil
}

// TestGetChunksGivesBytesAndDomainMisses: GetChunks gives a sink the bytes
// of a chunk this node holds (more than one frame's worth) and of one
// fetched from another member, in order; a chunk every owner said it does
// not hold is a MissError wrapping store.ErrNotFound, and one whose holder
// did not answer wraps transfer.ErrUnavailable and names it. A sink that
// fails ends the read with its error.
func TestGetChunksGivesBytesAndDomainMisses(t *testing.T) {
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 4, ReplicationFactor: 2, PeerTimeout: time.Second})
	ref := c.Register(t, "getchunks", 2, 1)
	name := ref.GetName()
	local := chunkOwnedBy(t, c, name, 2, 1, transfer.MaxFrameBytes+transfer.MaxFrameBytes/2, ids(c.Nodes[0], c.Nodes[1]))
	remote := chunkOwnedBy(t, c, name, 2, 500, 70_000, ids(c.Nodes[2], c.Nodes[3]))
	cutOff := chunkOwnedBy(t, c, name, 2, 1000, 4096, ids(c.Nodes[1], c.Nodes[2]))
	missing := chunkOwnedBy(t, c, name, 2, 2000, 64, ids(c.Nodes[2], c.Nodes[3]))
	put(t, c, 0, ref, local, remote, cutOff)
	if err := c.Nodes[2].Store.Evict(namespace.StoreName(name, ref.GetFingerprint()), storeID(t, cutOff.ID)); err != nil {
		t.Fatal(err)
	}
	c.Net.Partition([]string{c.Nodes[0].ID}, []string{c.Nodes[1].ID})

	req := &kvringv1.GetRequest{Namespace: ref, Ids: [][]byte{local.ID, remote.ID, cutOff.ID, missing.ID}}
	s := newRecordSink()
	if err := c.Nodes[0].Coord.GetChunks(context.Background(), req, s); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []clustertest.Chunk{local, remote} {
		if h := s.found[uint32(i)]; h.GetChunk().GetSize() != uint64(len(ch.Data)) || !bytes.Equal(s.data[uint32(i)], ch.Data) {
			t.Errorf("chunk %d: header %v and %d bytes, want its %d bytes", i, h, len(s.data[uint32(i)]), len(ch.Data))
		}
	}
	var me *coord.MissError
	if err := s.miss[2]; !errors.Is(err, transfer.ErrUnavailable) || !errors.As(err, &me) || !contains(me.Reason, c.Nodes[1].ID) {
		t.Errorf("a chunk whose holder did not answer: miss %v, want a MissError wrapping ErrUnavailable naming %s", err, c.Nodes[1].ID)
	}
	if err := s.miss[3]; !errors.Is(err, store.ErrNotFound) || errors.Is(err, transfer.ErrUnavailable) {
		t.Errorf("a chunk no owner holds: miss %v, want one wrapping store.ErrNotFound only", err)
	}
	if len(s.found)+len(s.miss) != 4 {
		t.Errorf("%d found and %d misses, want one answer per chunk", len(s.found), len(s.miss))
	}

	s = newRecordSink()
	s.failAt = 1
	if err := c.Nodes[0].Coord.GetChunks(context.Background(), req, s); !errors.Is(err, errSinkGone) {
		t.Errorf("a read whose sink fails: %v, want the sink's error", err)
	}
	if len(s.miss) != 0 || len(s.found) != 1 {
		t.Errorf("after the sink failed at chunk 1: %d found, %d misses, want chunk 0 only", len(s.found), len(s.miss))
	}
}

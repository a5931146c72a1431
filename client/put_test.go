package client

import (
	"slices"
	"testing"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestEachPutResultKeepsItsOwnHolders: the holders of a put's results share
// one allocation, yet each result lists only its chunk's holders, a chunk
// with none has nil, a second result for a chunk adds to its holders, and
// appending to one result's holders leaves its neighbour's alone.
func TestEachPutResultKeepsItsOwnHolders(t *testing.T) {
	ref := func(id string) *kvringv1.NodeRef { return &kvringv1.NodeRef{NodeId: id, GrpcAddr: id + ":1"} }
	p := newPutResults(make([]Chunk, 3))
	p.take([]*kvringv1.PutChunkResult{
		{Index: 0, Status: kvringv1.PutStatus(Stored), Holders: []*kvringv1.NodeRef{ref("a"), ref("b")}},
		{Index: 1, Status: kvringv1.PutStatus(Rejected)},
		{Index: 2, Status: kvringv1.PutStatus(AlreadyHeld), Holders: []*kvringv1.NodeRef{ref("c")}},
		{Index: 7, Status: kvringv1.PutStatus(Stored), Holders: []*kvringv1.NodeRef{ref("x")}}, // beyond the batch
	})
	p.take([]*kvringv1.PutChunkResult{{Index: 2, Status: kvringv1.PutStatus(AlreadyHeld), Holders: []*kvringv1.NodeRef{ref("d")}}})
	out := p.final()
	names := func(ns []Node) []string {
		var ids []string
		for _, n := range ns {
			ids = append(ids, n.ID)
		}
		return ids
	}
	if got := names(out[0].Holders); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("chunk 0 holders %v, want [a b]", got)
	}
	if out[1].Holders != nil {
		t.Fatalf("chunk 1 (rejected) holders %v, want nil", out[1].Holders)
	}
	if got := names(out[2].Holders); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("chunk 2 holders %v, want [c d]", got)
	}
	out[0].Holders = append(out[0].Holders, Node{ID: "mine"})
	if got := names(out[2].Holders); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("after appending to chunk 0's holders, chunk 2's are %v", got)
	}
	p2 := newPutResults(make([]Chunk, 2))
	p2.take([]*kvringv1.PutChunkResult{
		{Index: 0, Status: kvringv1.PutStatus(Stored), Holders: []*kvringv1.NodeRef{ref("a")}},
		{Index: 1, Status: kvringv1.PutStatus(Stored), Holders: []*kvringv1.NodeRef{ref("b")}},
	})
	res := p2.final()
	res[0].Holders = append(res[0].Holders, Node{ID: "mine"})
	if got := names(res[1].Holders); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("appending to chunk 0's holders changed chunk 1's: %v", got)
	}
}

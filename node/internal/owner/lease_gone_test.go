package owner

import (
	"strings"
	"testing"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// TestTheLeasesOfACoordinatorThatIsGoneEnd: the pins an owner took under the
// leases of a coordinator that is gone (dead, left or restarted) end when
// the node says so; they used to stay until their leases expired, as nobody
// was left to release them. Another coordinator's leases and this node's own
// stay.
func TestTheLeasesOfACoordinatorThatIsGoneEnd(t *testing.T) {
	t.Parallel()
	o, st, _ := newTestOwner(t)
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	var ids [3][]byte
	for i := range ids {
		var id store.ID
		id[0] = byte(10 + i)
		tok := stageReady(t, o, ref, id, []byte(strings.Repeat("kv", 4000+i)))
		if res := o.Commit("", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: id[:]}}); res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
			t.Fatalf("commit %d: %v", i, res[0])
		}
		ids[i] = id[:]
	}
	pin := func(coord string, lease uint64, id []byte) {
		t.Helper()
		held, _, _, err := o.LookupFrom(coord, "", ref, [][]byte{id}, nil, &kvringv1.LeasePin{LeaseId: lease, TtlMs: 60_000})
		if err != nil || len(held) != 1 || !held[0] {
			t.Fatalf("pinning lookup of lease %d: %v %v", lease, held, err)
		}
	}
	pin("dead", 1, ids[0])
	pin("dead", 2, ids[1])
	pin("alive", 3, ids[1])
	pin("", 4, ids[2]) // this node's own coordinator
	if got := st.Stats().PinnedChunks; got != 3 {
		t.Fatalf("%d chunks pinned, want 3", got)
	}
	if n := o.CoordinatorGone("dead"); n != 2 {
		t.Fatalf("CoordinatorGone ended %d leases, want 2", n)
	}
	if got := st.Stats().PinnedChunks; got != 2 {
		t.Fatalf("%d chunks pinned once the coordinator is gone, want 2 (the other leases')", got)
	}
	if n := o.CoordinatorGone("dead") + o.CoordinatorGone(""); n != 0 {
		t.Fatalf("a second CoordinatorGone, or one for this node, ended %d leases", n)
	}
	o.Unpin([]uint64{3, 4})
	if got := st.Stats().PinnedChunks; got != 0 {
		t.Fatalf("%d chunks pinned after the other leases were released, want 0", got)
	}
}

package respcoord

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// TestSlotTableFollowsPlacement: for every slot, a key placed by the slot's
// placement key is written to the slot table's owners, in order, in any
// namespace; draining members and members without a Redis-protocol port
// are left out, as writes leave out draining members.
func TestSlotTableFollowsPlacement(t *testing.T) {
	var members []ring.Member
	var peers []slotPeer
	for i := range 5 {
		id := fmt.Sprintf("node-%d", i)
		members = append(members, ring.Member{ID: id, Addr: id})
		peers = append(peers, slotPeer{id: id, respAddr: fmt.Sprintf("10.0.0.%d:9603", i)})
	}
	cfg := ring.DefaultConfig()
	cfg.ReplicationFactor = 2
	rg, err := ring.New(members, 9, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tab := buildSlotTable(rg, "node-2", 2, peers)
	if tab.Self < 0 || tab.Nodes[tab.Self].ID != "node-2" || tab.Epoch != 9 || len(tab.Nodes) != 5 {
		t.Fatalf("table: self %d, %d nodes, epoch %d", tab.Self, len(tab.Nodes), tab.Epoch)
	}
	var places slotPlaces
	covered := 0
	for ri, r := range tab.Ranges {
		covered += int(r.End-r.Start) + 1
		if ri%16 != 0 {
			continue // a sample: each search costs about PartitionCount hashes
		}
		for _, s := range []uint16{r.Start, r.End} {
			for _, ns := range []string{"resp:a", "resp:vllm:m:1:0"} {
				k := places.get(rg, ns, s)
				owners := rg.Owners(ns, k[:], 2)
				if len(owners) != len(r.Owners) {
					t.Fatalf("slot %d: %d owners, table %d", s, len(owners), len(r.Owners))
				}
				for i, o := range owners {
					if tab.Nodes[r.Owners[i]].ID != o.ID {
						t.Fatalf("slot %d in %s: owner %d is %s, the table says %s", s, ns, i, o.ID, tab.Nodes[r.Owners[i]].ID)
					}
				}
			}
		}
	}
	if covered != resp.SlotCount {
		t.Fatalf("the ranges cover %d slots", covered)
	}
	peers[1].draining, peers[3].respAddr = true, ""
	tab = buildSlotTable(rg, "node-1", 2, peers)
	if tab.Self != -1 || len(tab.Nodes) != 3 {
		t.Fatalf("with node-1 draining and node-3 without a port: self %d, %d nodes", tab.Self, len(tab.Nodes))
	}
	for _, r := range tab.Ranges {
		if len(r.Owners) == 0 {
			t.Fatalf("slots %d-%d have no owner", r.Start, r.End)
		}
	}
}

// TestSlotPlaceKeysAreTheFirstOfTheirPartition pins the placement keys of
// a few slots to their definition, the first counter whose key falls in
// the slot's partition, found by the plain loop over Partition: nodes of
// two releases must compute the same key for a slot, or a rolling upgrade
// would place one key's chunks in two groups.
func TestSlotPlaceKeysAreTheFirstOfTheirPartition(t *testing.T) {
	rg, err := ring.New([]ring.Member{{ID: "a", Addr: "a"}, {ID: "b", Addr: "b"}}, 1, ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	parts := rg.Config().PartitionCount
	for _, ns := range []string{"resp:default", "resp:Qwen/Qwen2.5-0.5B-Instruct"} {
		for _, s := range []uint16{0, 1, 4095, 16383} {
			got := slotPlaceKey(rg, ns, s)
			var k [32]byte
			copy(k[:], "kvring/resp/slot")
			binary.BigEndian.PutUint16(k[16:], s)
			for c := uint32(0); ; c++ {
				binary.BigEndian.PutUint32(k[18:], c)
				if rg.Partition(ns, k[:]) == slotPartition(s, parts) {
					break
				}
			}
			if got != store.ID(k) {
				t.Fatalf("%s slot %d: %x, plain loop %x", ns, s, got, k)
			}
		}
	}
}

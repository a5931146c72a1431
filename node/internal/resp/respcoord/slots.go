package respcoord

import (
	"cmp"
	"encoding/binary"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// slotPartition is the ring partition Redis Cluster slot s stands for: the
// slots are spread over the partitions in order, a run of consecutive slots
// per partition. It depends only on the partition count, a cluster-wide
// setting, so every node (and every restart) agrees.
func slotPartition(s uint16, partitions int) int { return int(s) * partitions / resp.SlotCount }

// slotPeer is what the slot table needs of a member.
type slotPeer struct {
	id, respAddr string
	draining     bool
}

// buildSlotTable is the slot table of rg: each slot's owners are its
// partition's write owners (draining members and members without a
// Redis-protocol port skipped), at most replicas of them, primary first;
// a slot none of whose owners is left is served by one node that is.
// Consecutive slots with the same owners are one range. Pure.
func buildSlotTable(rg *ring.Ring, self string, replicas int, peers []slotPeer) *resp.SlotTable {
	t := &resp.SlotTable{Epoch: rg.Epoch(), Self: -1}
	index := map[string]int{}
	slices.SortFunc(peers, func(a, b slotPeer) int { return cmp.Compare(a.id, b.id) })
	for _, p := range peers {
		host, port, err := net.SplitHostPort(p.respAddr)
		n, perr := strconv.Atoi(port)
		if p.respAddr == "" || err != nil || perr != nil || p.draining {
			continue
		}
		index[p.id] = len(t.Nodes)
		if p.id == self {
			t.Self = len(t.Nodes)
		}
		t.Nodes = append(t.Nodes, resp.SlotNode{ID: p.id, Host: host, Port: n})
	}
	parts := rg.Config().PartitionCount
	owners := make([][]int, parts) // per partition, filled as slots need it
	done := make([]bool, parts)
	for s := range resp.SlotCount {
		p := slotPartition(uint16(s), parts)
		if !done[p] {
			done[p] = true
			for _, m := range rg.PartitionOwners(p, rg.Len()) {
				if i, ok := index[m.ID]; ok && len(owners[p]) < replicas {
					owners[p] = append(owners[p], i)
				}
			}
			if len(owners[p]) == 0 && len(t.Nodes) > 0 {
				// Its owners drain or serve no Redis clients: a node that
				// does serves the slot, writing through to the owners.
				owners[p] = []int{p % len(t.Nodes)}
			}
		}
		o := owners[p]
		if k := len(t.Ranges); k > 0 && slices.Equal(t.Ranges[k-1].Owners, o) {
			t.Ranges[k-1].End = uint16(s)
			continue
		}
		t.Ranges = append(t.Ranges, resp.SlotRange{Start: uint16(s), End: uint16(s), Owners: o})
	}
	return t
}

// slotPlaceKey finds the placement key of slot s in namespace on rg: the
// first key of the form "kvring/resp/slot" ‖ s ‖ counter (zero-padded to 32
// bytes) whose ring partition is slotPartition(s). A pure function of the
// namespace, the slot and the partition count, the same in every release
// (nodes of two builds must agree); about PartitionCount tries on average
// (ring.SearchPartition: 0.5 ms with the default 65,521 partitions), so
// callers cache it (slotPlaces).
func slotPlaceKey(rg *ring.Ring, namespace string, s uint16) store.ID {
	var k store.ID
	copy(k[:], "kvring/resp/slot")
	binary.BigEndian.PutUint16(k[16:], s)
	parts := rg.Config().PartitionCount
	if _, ok := rg.SearchPartition(namespace, k[:], 18, slotPartition(s, parts), uint32(64*parts)); !ok {
		panic("BUG: no placement key found for a slot in 64 times the partition count")
	}
	return k
}

// slotPlaces caches slotPlaceKey per namespace and slot, at most
// maxSlotPlaces of them (about 100 bytes each): past that the cache starts
// over, so names a client makes up cannot grow it without bound.
type slotPlaces struct {
	mu    sync.RWMutex
	parts int
	keys  map[slotPlaceRef]store.ID
}

// maxSlotPlaces bounds the slotPlaces cache: 16 namespaces' every slot.
const maxSlotPlaces = 16 * 16384

type slotPlaceRef struct {
	namespace string
	slot      uint16
}

func (c *slotPlaces) get(rg *ring.Ring, namespace string, s uint16) store.ID {
	ref := slotPlaceRef{namespace, s}
	parts := rg.Config().PartitionCount
	c.mu.RLock()
	k, ok := c.keys[ref]
	ok = ok && c.parts == parts
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = slotPlaceKey(rg, namespace, s)
	c.mu.Lock()
	if c.parts != parts || c.keys == nil || len(c.keys) >= maxSlotPlaces {
		c.parts, c.keys = parts, map[slotPlaceRef]store.ID{}
	}
	c.keys[ref] = k
	c.mu.Unlock()
	return k
}

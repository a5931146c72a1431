package localsock

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/coord"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// coreCluster is the socket's Cluster over a node of the shared in-process
// cluster (clustertest): its coordinator in process, as the node's
// adapter (node/internal/localsock/sockcoord) wires it, its Get over the
// node's Cache service.
type coreCluster struct {
	n     *clustertest.Node
	svc   *coord.Service
	cache kvringv1.CacheClient
}

func newCoreCluster(t *testing.T, c *clustertest.Core, i int) *coreCluster {
	return &coreCluster{n: c.Nodes[i], svc: coord.NewService(c.Nodes[i].Coord), cache: c.Cache(t, i)}
}

func (c *coreCluster) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	return c.svc.RegisterNamespace(ctx, req)
}

func (c *coreCluster) Publish(ctx context.Context, begin *kvringv1.PutBegin, blobs []*store.Blob) (PutOutcome, error) {
	epoch, results, err := c.n.Coord.Publish(ctx, begin, blobs)
	return PutOutcome{Epoch: epoch, Results: results}, err
}

func (c *coreCluster) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	return c.svc.Lookup(ctx, req)
}

func (c *coreCluster) ReleaseLease(ctx context.Context, lease uint64) (bool, error) {
	r, err := c.svc.ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lease})
	return r.GetReleased(), err
}

func (c *coreCluster) Get(ctx context.Context, req *kvringv1.GetRequest, alloc func(int, int64) ([]byte, error),
	done func(int, *kvringv1.ChunkHeader, bool, string)) error {
	got, err := clustertest.Get(ctx, c.cache, req.GetNamespace(), req.GetIds(), req.GetGroups())
	if err != nil {
		return err
	}
	for i, g := range got {
		h := g.Header
		if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
			done(i, h, false, fmt.Sprintf("%s: %s", h.GetStatus(), h.GetReason()))
			continue
		}
		buf, err := alloc(i, int64(len(g.Data)))
		if err != nil {
			done(i, h, false, err.Error())
			continue
		}
		copy(buf, g.Data)
		done(i, h, crc32c.Checksum(buf) == h.GetChunk().GetCrc32C(), "")
	}
	return nil
}

func (c *coreCluster) Close() error { return nil }

// TestSocketPublishesReachEveryOwnerOfTheCluster: over the shared
// in-process cluster, a publish through one node's socket is stored on
// both owners of each chunk (this node's copy is the blob's slot, the
// other's sent over the network), a lookup through the socket counts
// them, and a get through another node's socket returns their bytes.
func TestSocketPublishesReachEveryOwnerOfTheCluster(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 2})
	servers := make([]*Server, 2)
	for i := range servers {
		servers[i] = startServer(t, c.Nodes[i].Store, func(cfg *Config) { cfg.Cluster = newCoreCluster(t, c, i) })
	}
	cl := dial(t, servers[0])
	defer cl.Close()
	ns, err := cl.RegisterNamespace("sock/cluster", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int64{3 << 20, 4096}
	blobs, err := cl.CreateBlobs(sizes)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][32]byte, len(blobs))
	bids := make([]uint64, len(blobs))
	for i, b := range blobs {
		for off := range b.Data {
			b.Data[off] = byte(off*7 + i)
		}
		ids[i] = sha256.Sum256(fmt.Append(nil, "sock-cluster", i))
		bids[i] = b.ID
	}
	want := [][]byte{append([]byte(nil), blobs[0].Data...), append([]byte(nil), blobs[1].Data...)}
	res, err := cl.SealPublishAndDelete(ns, ids, bids, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != "stored" || len(r.Holders) != 2 {
			t.Fatalf("chunk %d: %+v, want stored on both nodes", i, r)
		}
	}
	lk, err := cl.Lookup(ns, ids, nil, 0)
	if err != nil || lk.Held != len(ids) {
		t.Fatalf("lookup: %+v %v", lk, err)
	}
	other := dial(t, servers[1])
	defer other.Close()
	got, err := other.GetChunks(ns, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || string(g.Blob.Data) != string(want[i]) {
			t.Fatalf("chunk %d through the other node's socket: found %v, %q", i, g.Found, g.Reason)
		}
	}
}

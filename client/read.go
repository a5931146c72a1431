package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// LookupResult says how much of a prefix the cluster holds now.
type LookupResult struct {
	// Held is the number of leading ids held by a reachable node.
	Held int
	// Lease pins those chunks until LeaseTTL passes or ReleaseLease; 0 when
	// nothing was pinned.
	Lease    uint64
	LeaseTTL time.Duration
	// Epoch is the ring epoch the answer was computed under.
	Epoch uint64
}

// Lookup asks how many leading ids are held now. With pin > 0 the held
// chunks are pinned against eviction for that long (the node caps it). When
// the namespace groups chunks (Schema.ChunksPerGroup > 1), ids must start at
// a prompt's first chunk: their group keys are derived from it.
func (c *Client) Lookup(ctx context.Context, ids []ChunkID, pin time.Duration) (LookupResult, error) {
	return c.lookup(ctx, ids, c.prefixKeys(ids), pin)
}

// LookupPlaced is Lookup for ids that start anywhere in their prompt:
// groups[i] is the group key of ids[i] (see GroupKeys). It ignores groups
// when the namespace places every chunk by its own id.
func (c *Client) LookupPlaced(ctx context.Context, ids, groups []ChunkID, pin time.Duration) (LookupResult, error) {
	keys, err := c.placedKeys(ids, groups)
	if err != nil {
		return LookupResult{}, err
	}
	return c.lookup(ctx, ids, keys, pin)
}

func (c *Client) lookup(ctx context.Context, ids []ChunkID, keys [][]byte, pin time.Duration) (LookupResult, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cc, err := c.conn.ready(ctx)
	if err != nil {
		return LookupResult{}, err
	}
	raw := make([][]byte, len(ids))
	for i := range ids {
		raw[i] = ids[i][:]
	}
	groups := groupRuns(keys)
	var res LookupResult
	err = c.retryUnregistered(ctx, cc, func(ref *kvringv1.NamespaceRef) error {
		req := &kvringv1.LookupRequest{Namespace: ref, Ids: raw, PinTtlMs: uint32(pin / time.Millisecond), Groups: groups}
		via := cc
		var resp *kvringv1.LookupResponse
		var err error
		if len(raw) > 0 {
			if occ := c.lookupConn(cc, ref.GetName(), keyAt(keys, raw, 0)); occ != nil {
				resp, err = kvringv1.NewCacheClient(occ).Lookup(ctx, req)
				if err = transfer.FromStatus(err); err == nil {
					via = occ
				} else if !ownerFailed(ctx, err) {
					return c.callErr(occ, "lookup", err)
				}
			}
		}
		if via == cc {
			if resp, err = kvringv1.NewCacheClient(cc).Lookup(ctx, req); err != nil {
				return c.callErr(cc, "lookup", err)
			}
		}
		c.route.observe(via.Target(), resp.GetEpoch())
		if c.route != nil && len(groups) > 0 {
			c.route.hints.learn(ref.GetName(), groups, resp.GetSpreadWidth(), time.Now())
			c.route.hints.noteLoad(via.Target(), resp.GetLoad(), time.Now())
		}
		if resp.GetLeaseId() != 0 && via != cc {
			c.leaseAt(resp.GetLeaseId(), via.Target(), time.Duration(resp.GetLeaseTtlMs())*time.Millisecond)
		}
		if int(resp.GetHeld()) > len(ids) {
			return fmt.Errorf("kvring lookup: the node reported %d of %d ids held", resp.GetHeld(), len(ids))
		}
		res = LookupResult{Held: int(resp.GetHeld()), Lease: resp.GetLeaseId(),
			LeaseTTL: time.Duration(resp.GetLeaseTtlMs()) * time.Millisecond, Epoch: resp.GetEpoch()}
		return nil
	})
	return res, err
}

// ReleaseLease ends a lookup's pins early. A lease granted by another node,
// or already expired, is left to expire.
func (c *Client) ReleaseLease(ctx context.Context, lease uint64) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cc, err := c.conn.ready(ctx)
	if err != nil {
		return err
	}
	if addr := c.leaseNode(lease); addr != "" && c.route != nil {
		if occ, err := c.route.ownerConn(addr); err == nil {
			_, err = kvringv1.NewCacheClient(occ).ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lease})
			if err == nil {
				return nil
			}
			return c.callErr(occ, "release lease", err)
		}
	}
	if _, err := kvringv1.NewCacheClient(cc).ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lease}); err != nil {
		return c.callErr(cc, "release lease", err)
	}
	return nil
}

// GetResult is one chunk read back.
type GetResult struct {
	ID     ChunkID
	Found  bool
	Data   []byte // the chunk's bytes when Found; checksum verified
	Holder Node
	// Reason says why a chunk was not found (not held, no owner reachable,
	// bytes failed their checksum).
	Reason string
}

// Get reads chunks. A chunk that is not held, or whose bytes fail their
// checksum, comes back with Found false and a reason, never as data. When
// the namespace groups chunks (Schema.ChunksPerGroup > 1), ids must start at
// a prompt's first chunk, as for Lookup; GetPlaced reads any ids.
func (c *Client) Get(ctx context.Context, ids []ChunkID) ([]GetResult, error) {
	return c.getKeys(ctx, ids, c.prefixKeys(ids))
}

// GetPlaced is Get for ids anywhere in their prompts: groups[i] is the group
// key of ids[i] (see GroupKeys). It ignores groups when the namespace places
// every chunk by its own id.
func (c *Client) GetPlaced(ctx context.Context, ids, groups []ChunkID) ([]GetResult, error) {
	keys, err := c.placedKeys(ids, groups)
	if err != nil {
		return nil, err
	}
	return c.getKeys(ctx, ids, keys)
}

// getKeys reads ids (keys: their ring keys, or nil when each id is its own)
// over the connected node and the owners' connections.
func (c *Client) getKeys(ctx context.Context, ids []ChunkID, keys [][]byte) ([]GetResult, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cc, err := c.conn.ready(ctx)
	if err != nil {
		return nil, err
	}
	raw := make([][]byte, len(ids))
	for i := range ids {
		raw[i] = ids[i][:]
	}
	var out []GetResult
	err = c.retryUnregistered(ctx, cc, func(ref *kvringv1.NamespaceRef) error {
		var err error
		out, err = c.getRouted(ctx, cc, ref, ids, raw, keys)
		return err
	})
	return out, err
}

func (c *Client) get(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, ids []ChunkID, raw, keys [][]byte) ([]GetResult, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := kvringv1.NewCacheClient(cc).Get(sctx, &kvringv1.GetRequest{Namespace: ref, Ids: raw, Groups: groupRuns(keys)})
	if err != nil {
		return nil, c.callErr(cc, "get", err)
	}
	out := make([]GetResult, len(ids))
	for i := range out {
		out[i].ID = ids[i]
		out[i].Reason = "the node sent no answer for this chunk"
	}
	var cur *GetResult
	var want uint64
	var crc, sum uint32
	// Frames are read in place (transfer.InFrame) and copied once into the
	// chunk's buffer, the checksum computed in the same pass.
	in := transfer.InFrame{Msg: new(kvringv1.GetResponse), Field: transfer.GetDataField}
	defer in.Release()
	for first := true; ; first = false {
		err := stream.RecvMsg(&in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, c.callErr(cc, "get", err)
		}
		m := in.Msg.(*kvringv1.GetResponse)
		if first {
			c.route.observe(cc.Target(), m.GetEpoch())
		}
		if h := m.GetHeader(); h != nil {
			if cur != nil {
				return nil, fmt.Errorf("kvring get: the node started chunk %d before finishing the previous one", h.GetIndex())
			}
			i := int(h.GetIndex())
			if i >= len(out) {
				return nil, fmt.Errorf("kvring get: the node answered for chunk %d of %d", i, len(out))
			}
			r := &out[i]
			r.Holder = Node{ID: h.GetHolder().GetNodeId(), Addr: h.GetHolder().GetGrpcAddr()}
			if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
				r.Reason = h.GetReason()
				if r.Reason == "" {
					r.Reason = "not held"
				}
				continue
			}
			want, crc, sum = h.GetChunk().GetSize(), h.GetChunk().GetCrc32C(), 0
			if bound := c.chunkBound(); want > bound {
				return nil, fmt.Errorf("kvring get: the node declared chunk %d of %d bytes, above the cluster's largest chunk %d", i, want, bound)
			}
			r.Data = make([]byte, 0, want)
			cur = r
			if want == 0 {
				cur = nil
			}
			continue
		}
		f, ok := in.Frame()
		if cur == nil || !ok || f.Offset != uint64(len(cur.Data)) || uint64(len(cur.Data)+f.Len()) > want {
			return nil, fmt.Errorf("kvring get: malformed frame from the node")
		}
		cur.Data, sum = f.AppendChecksum(cur.Data, sum)
		in.Release()
		if uint64(len(cur.Data)) == want {
			if sum == crc {
				cur.Found, cur.Reason = true, ""
			} else {
				cur.Data, cur.Reason = nil, "bytes failed their checksum"
			}
			cur = nil
		}
	}
	if cur != nil {
		cur.Data, cur.Reason = nil, "the stream ended inside the chunk"
	}
	return out, nil
}

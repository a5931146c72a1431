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
	// NotRegistered: the cluster does not know the namespace (nothing was
	// ever written to it, or the name is misspelt), so nothing is held. A
	// read never registers a namespace.
	NotRegistered bool
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
	err = c.retryUnregistered(ctx, cc, false, func(ref *kvringv1.NamespaceRef) error {
		req := &kvringv1.LookupRequest{Namespace: ref, Ids: raw, PinTtlMs: uint32(pin / time.Millisecond), Groups: groups}
		via := cc
		var resp *kvringv1.LookupResponse
		var err error
		if len(raw) > 0 {
			if occ := c.lookupConn(cc, ref.GetName(), keyAt(keys, raw, 0)); occ != nil {
				octx, ocancel := ownerAttempt(ctx)
				resp, err = kvringv1.NewCacheClient(occ).Lookup(octx, req)
				ocancel()
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
	if errors.Is(err, transfer.ErrUnknownNamespace) {
		return LookupResult{NotRegistered: true}, nil
	}
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
	ID    ChunkID
	Found bool
	// Data is the chunk's bytes when Found, checksum verified: a buffer of
	// its own after Get, a prefix of the caller's buffer after GetInto.
	Data   []byte
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
	return c.getKeys(ctx, ids, c.prefixKeys(ids), nil)
}

// GetPlaced is Get for ids anywhere in their prompts: groups[i] is the group
// key of ids[i] (see GroupKeys). It ignores groups when the namespace places
// every chunk by its own id.
func (c *Client) GetPlaced(ctx context.Context, ids, groups []ChunkID) ([]GetResult, error) {
	keys, err := c.placedKeys(ids, groups)
	if err != nil {
		return nil, err
	}
	return c.getKeys(ctx, ids, keys, nil)
}

// GetInto is Get reading each chunk into a buffer the caller owns, so that a
// read allocates nothing per chunk: bufs[i] receives ids[i], and a found
// chunk's Data is bufs[i][:size]. A chunk longer than its buffer is a miss
// whose Reason says so. The buffer of a miss may hold partial or damaged
// bytes: only a result with Found counts. The client writes the buffers
// only until GetInto returns and keeps no reference to them.
func (c *Client) GetInto(ctx context.Context, ids []ChunkID, bufs [][]byte) ([]GetResult, error) {
	if len(bufs) != len(ids) {
		return nil, fmt.Errorf("kvring get: %d buffers for %d ids", len(bufs), len(ids))
	}
	return c.getKeys(ctx, ids, c.prefixKeys(ids), bufs)
}

// GetPlacedInto is GetInto for ids anywhere in their prompts, as GetPlaced.
func (c *Client) GetPlacedInto(ctx context.Context, ids, groups []ChunkID, bufs [][]byte) ([]GetResult, error) {
	if len(bufs) != len(ids) {
		return nil, fmt.Errorf("kvring get: %d buffers for %d ids", len(bufs), len(ids))
	}
	keys, err := c.placedKeys(ids, groups)
	if err != nil {
		return nil, err
	}
	return c.getKeys(ctx, ids, keys, bufs)
}

// getArgs are the chunks of one Get call or share: ids, their wire form,
// their ring keys (nil when each id is its own) and the caller's buffers
// (nil: each found chunk gets a buffer of its own).
type getArgs struct {
	ids  []ChunkID
	raw  [][]byte
	keys [][]byte
	bufs [][]byte
}

// pick returns the args of the positions idx, in order.
func (a getArgs) pick(idx []int) getArgs {
	p := getArgs{ids: pick(a.ids, idx), raw: pick(a.raw, idx), keys: pickKeys(a.keys, idx)}
	if a.bufs != nil {
		p.bufs = pick(a.bufs, idx)
	}
	return p
}

// getKeys reads ids (keys: their ring keys, or nil when each id is its own;
// bufs: the caller's buffers, or nil) over the connected node and the
// owners' connections.
func (c *Client) getKeys(ctx context.Context, ids []ChunkID, keys, bufs [][]byte) ([]GetResult, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	cc, err := c.conn.ready(ctx)
	if err != nil {
		return nil, err
	}
	a := getArgs{ids: ids, raw: make([][]byte, len(ids)), keys: keys, bufs: bufs}
	for i := range ids {
		a.raw[i] = ids[i][:]
	}
	var out []GetResult
	err = c.retryUnregistered(ctx, cc, false, func(ref *kvringv1.NamespaceRef) error {
		var err error
		out, err = c.getRouted(ctx, cc, ref, a)
		return err
	})
	if errors.Is(err, transfer.ErrUnknownNamespace) {
		out = make([]GetResult, len(ids))
		for i, id := range ids {
			out[i] = GetResult{ID: id, Reason: c.notRegistered()}
		}
		return out, nil
	}
	return out, err
}

// chunkBuffer returns the empty buffer chunk i of a is read into: the
// caller's (capacity want, so that the bytes stay in it) or a new one; ok
// false when the caller's is too short, with the reason.
func (a getArgs) chunkBuffer(i int, want uint64) (buf []byte, reason string, ok bool) {
	if a.bufs == nil {
		return make([]byte, 0, want), "", true
	}
	b := a.bufs[i]
	if uint64(len(b)) < want {
		return nil, fmt.Sprintf("the chunk is %d bytes, its buffer %d", want, len(b)), false
	}
	return b[:0:want], "", true
}

// get reads a's chunks over cc in one Get stream, verifying each chunk's
// checksum as its bytes are copied into its buffer.
func (c *Client) get(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, a getArgs) ([]GetResult, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := kvringv1.NewCacheClient(cc).Get(sctx, &kvringv1.GetRequest{Namespace: ref, Ids: a.raw, Groups: groupRuns(a.keys)})
	if err != nil {
		return nil, c.callErr(cc, "get", err)
	}
	g := &getReader{a: a, bound: c.chunkBound(), out: make([]GetResult, len(a.ids))}
	for i := range g.out {
		g.out[i].ID = a.ids[i]
		g.out[i].Reason = "the node sent no answer for this chunk"
	}
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
			err = g.header(h)
		} else {
			err = g.frame(&in)
		}
		if err != nil {
			return nil, err
		}
	}
	if g.cur != nil {
		g.cur.Data, g.cur.Reason = nil, "the stream ended inside the chunk"
	}
	return g.out, nil
}

// getReader is the state of one Get stream as its messages arrive: the
// results, and the chunk whose frames are being received.
type getReader struct {
	a     getArgs
	bound uint64 // the largest chunk a node may declare
	out   []GetResult
	cur   *GetResult // the chunk being received; nil when its bytes are discarded
	// reading: a chunk's frames are being received (want bytes, got so
	// far, crc declared, sum of what arrived).
	reading   bool
	want, got uint64
	crc, sum  uint32
}

// header starts the chunk a header announces: a miss with its reason, or
// the bytes that follow.
func (g *getReader) header(h *kvringv1.ChunkHeader) error {
	if g.reading {
		return fmt.Errorf("kvring get: the node started chunk %d before finishing the previous one", h.GetIndex())
	}
	i := int(h.GetIndex())
	if i >= len(g.out) {
		return fmt.Errorf("kvring get: the node answered for chunk %d of %d", i, len(g.out))
	}
	r := &g.out[i]
	r.Holder = Node{ID: h.GetHolder().GetNodeId(), Addr: h.GetHolder().GetGrpcAddr()}
	if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
		r.Reason = h.GetReason()
		if r.Reason == "" {
			r.Reason = "not held"
		}
		return nil
	}
	g.want, g.got, g.crc, g.sum = h.GetChunk().GetSize(), 0, h.GetChunk().GetCrc32C(), 0
	if g.want > g.bound {
		return fmt.Errorf("kvring get: the node declared chunk %d of %d bytes, above the cluster's largest chunk %d", i, g.want, g.bound)
	}
	buf, reason, ok := g.a.chunkBuffer(i, g.want)
	r.Data, r.Reason, g.cur = buf, reason, nil
	if ok {
		g.cur = r
	}
	g.reading = g.want > 0
	return nil
}

// frame takes one frame of the chunk being read (and releases it); the
// last one decides the chunk: found when its checksum matches.
func (g *getReader) frame(in *transfer.InFrame) error {
	f, ok := in.Frame()
	if !g.reading || !ok || f.Offset != g.got || g.got+uint64(f.Len()) > g.want {
		return fmt.Errorf("kvring get: malformed frame from the node")
	}
	if g.cur != nil {
		g.cur.Data, g.sum = f.AppendChecksum(g.cur.Data, g.sum)
	}
	g.got += uint64(f.Len())
	in.Release()
	if g.got == g.want {
		if g.cur != nil && g.sum == g.crc {
			g.cur.Found, g.cur.Reason = true, ""
		} else if g.cur != nil {
			g.cur.Data, g.cur.Reason = nil, "bytes failed their checksum"
		}
		g.cur, g.reading = nil, false
	}
	return nil
}

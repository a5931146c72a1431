package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/launch"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// attack runs until ctx ends and says what it did. It calls ready once it
// holds what it set out to hold (its puts staged, its pins or blobs taken),
// so that the victim's replay measures the hold, not the attacker's set-up.
type attack func(ctx context.Context, nd *launch.Node, ready func()) string

// attacks are the attacks on a node's shared budgets, as an outsider or a
// local client would run them.
var attacks = map[string]attack{
	"stalled":   stalledPuts,
	"trickle":   tricklingPuts,
	"beginless": beginlessPuts,
	"pins":      pinHoard,
	"blobs":     blobHoard,
}

func attackNames() []string { return []string{"stalled", "trickle", "beginless", "pins", "blobs"} }

// attackerNS registers the attacker's namespace and returns its reference.
func attackerNS(ctx context.Context, nd *launch.Node) (*client.Client, *kvringv1.NamespaceRef, error) {
	c, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{nd.GRPC},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Namespace: "attacker",
		Schema: client.Schema{Model: "attacker", Dtype: "bf16", TokensPerChunk: 16}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, err
	}
	if err := awaitConnected(ctx, c); err != nil {
		c.Close()
		return nil, nil, err
	}
	fp, err := c.Register(ctx)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, &kvringv1.NamespaceRef{Name: "attacker", Fingerprint: fp}, nil
}

// openHold opens a Put on cc declaring n random chunks of size bytes and
// returns the stream once the node answered its need message (nil when it
// could not).
func openHold(ctx context.Context, cc *grpc.ClientConn, ref *kvringv1.NamespaceRef, n, size int) (kvringv1.Cache_PutClient, error) {
	refs := make([]*kvringv1.ChunkRef, n)
	for i := range refs {
		id := make([]byte, 32)
		rand.Read(id)
		refs[i] = &kvringv1.ChunkRef{Id: id, Size: uint64(size), Crc32C: 1}
	}
	s, err := kvringv1.NewCacheClient(cc).Put(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref, Chunks: refs}}}); err != nil {
		return nil, err
	}
	if _, err := s.Recv(); err != nil {
		return nil, err
	}
	return s, nil
}

// holdPuts keeps a put declaring 64 chunks of 4 MiB open, re-opening it
// whenever the node ends it; each open put is fed by feed (nil: nothing is
// sent, the stall).
func holdPuts(ctx context.Context, nd *launch.Node, ready func(), feed func(context.Context, kvringv1.Cache_PutClient)) string {
	c, ref, err := attackerNS(ctx, nd)
	if err != nil {
		return "cannot register: " + err.Error()
	}
	defer c.Close()
	cc, err := grpc.NewClient(nd.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err.Error()
	}
	defer cc.Close()
	opened, ended := 0, 0
	for ctx.Err() == nil {
		s, err := openHold(ctx, cc, ref, 64, 4<<20)
		if err != nil {
			continue
		}
		opened++
		ready()
		if feed != nil {
			go feed(ctx, s)
		}
		if _, err := s.Recv(); err != nil && ctx.Err() == nil {
			ended++ // the node ended it: open another at once
		}
	}
	return fmt.Sprintf("%d puts of 64×4 MiB opened, %d ended by the node", opened, ended)
}

func stalledPuts(ctx context.Context, nd *launch.Node, ready func()) string {
	return holdPuts(ctx, nd, ready, nil)
}

// tricklingPuts sends one byte of each chunk every 5 s.
func tricklingPuts(ctx context.Context, nd *launch.Node, ready func()) string {
	return holdPuts(ctx, nd, ready, func(ctx context.Context, s kvringv1.Cache_PutClient) {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for off := uint64(0); ; off++ {
			for idx := range uint32(64) {
				if s.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{Index: idx, Offset: off, Data: []byte{0}}}}) != nil {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// beginlessPuts keeps 20 connections × 256 Put streams open that never
// send their begin message, re-opening each the node ends.
func beginlessPuts(ctx context.Context, nd *launch.Node, ready func()) string {
	var opened, ended atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		cc, err := grpc.NewClient(nd.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err.Error()
		}
		defer cc.Close()
		for range 256 {
			wg.Go(func() {
				for ctx.Err() == nil {
					s, err := kvringv1.NewCacheClient(cc).Put(ctx)
					if err != nil {
						continue
					}
					if opened.Add(1) == 20*256 {
						ready()
					}
					if _, err := s.Recv(); err != nil && ctx.Err() == nil {
						ended.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	return fmt.Sprintf("%d begin-less puts opened, %d ended by the node", opened.Load(), ended.Load())
}

// pinHoard stores 160 chunks of 1 MiB and keeps them pinned with 5-minute
// lookup leases, renewed every 10 s.
func pinHoard(ctx context.Context, nd *launch.Node, ready func()) string {
	c, _, err := attackerNS(ctx, nd)
	if err != nil {
		return "cannot register: " + err.Error()
	}
	defer c.Close()
	var ids []client.ChunkID
	for range 160 {
		data := make([]byte, 1<<20)
		rand.Read(data)
		ch := client.Chunk{Data: data}
		rand.Read(ch.ID[:])
		if res, err := c.Put(ctx, []client.Chunk{ch}); err == nil && res[0].Status == client.Stored {
			ids = append(ids, ch.ID)
		}
	}
	most, renewals := 0, 0
	for ctx.Err() == nil {
		held := 0
		for part := range slices.Chunk(ids, 16) {
			if lr, err := c.Lookup(ctx, part, 5*time.Minute); err == nil && lr.Lease != 0 {
				held += lr.Held
			}
		}
		most = max(most, held)
		renewals++
		ready()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
	return fmt.Sprintf("%d MiB of its %d MiB of chunks pinned by one round's leases at most (%d rounds, each renewing every lease)", most, len(ids), renewals)
}

// blobHoard creates unsealed 1 MiB blobs on the local socket until the
// node refuses, then holds them.
func blobHoard(ctx context.Context, nd *launch.Node, ready func()) string {
	lc, err := local.Dial(ctx, local.Config{Path: nd.SocketPath()})
	if err != nil {
		return "cannot dial the socket: " + err.Error()
	}
	defer lc.Close()
	n := 0
	var last error
	for n < 1024 {
		if _, err := lc.CreateBlob(1 << 20); err != nil {
			last = err
			break
		}
		n++
	}
	ready()
	<-ctx.Done()
	return fmt.Sprintf("%d unsealed blobs of 1 MiB held (then: %v)", n, last)
}

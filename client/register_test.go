package client

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// registryCache is a node whose registry starts empty: a registration
// without transfer.RegisterExistingKey creates the namespace, one with it
// only checks (unknown: ErrUnknownNamespace). Lookup answers every id held.
type registryCache struct {
	kvringv1.UnimplementedCacheServer
	mu      sync.Mutex
	known   bool
	creates int // registrations that could create
	checks  int // registrations that only checked
}

func (s *registryCache) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Contains(metadata.ValueFromIncomingContext(ctx, transfer.RegisterExistingKey), "true") {
		s.checks++
		if !s.known {
			return nil, transfer.ToStatus(transfer.ErrUnknownNamespace)
		}
	} else {
		s.creates++
		s.known = true
	}
	return &kvringv1.RegisterNamespaceResponse{Epoch: 1, Namespace: &kvringv1.NamespaceRecord{
		Name: req.GetName(), Fingerprint: bytes.Repeat([]byte{7}, 32)}}, nil
}

func (s *registryCache) Lookup(_ context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	return &kvringv1.LookupResponse{Epoch: 1, Held: uint32(len(req.GetIds()))}, nil
}

func (s *registryCache) counts() (creates, checks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates, s.checks
}

// TestReadsNeverRegisterANamespace: Lookup and Get of a namespace the
// cluster does not know (nothing written to it, or a misspelt name) only
// check it: they answer nothing held (NotRegistered) and misses saying
// why, and the namespace stays unregistered; Register (and Put) create it,
// after which reads go through.
func TestReadsNeverRegisterANamespace(t *testing.T) {
	t.Parallel()
	srv := &registryCache{}
	c := fakeNodeClient(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := []ChunkID{{1}, {2}}

	lr, err := c.Lookup(ctx, ids, 0)
	if err != nil || lr.Held != 0 || !lr.NotRegistered {
		t.Fatalf("lookup of an unknown namespace: %+v, %v; want nothing held, not registered", lr, err)
	}
	gr, err := c.Get(ctx, ids)
	if err != nil || len(gr) != 2 {
		t.Fatalf("get of an unknown namespace: %+v, %v", gr, err)
	}
	for i, r := range gr {
		if r.Found || r.ID != ids[i] || !strings.Contains(r.Reason, `namespace "ns" is not registered`) {
			t.Fatalf("get result %d: %+v, want a miss saying the namespace is not registered", i, r)
		}
	}
	if creates, checks := srv.counts(); creates != 0 || checks == 0 {
		t.Fatalf("reads made %d registrations that create and %d checks; want only checks", creates, checks)
	}

	if _, err := c.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if lr, err := c.Lookup(ctx, ids, 0); err != nil || lr.Held != 2 || lr.NotRegistered {
		t.Fatalf("lookup once registered: %+v, %v", lr, err)
	}
}

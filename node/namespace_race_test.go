package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/transfer"
)

// TestConflictingRegistrationsAtOnceAgreeOnOneSchema: two engines register
// one namespace name with different schemas at the same moment, through two
// coordinators. Exactly one registration succeeds, the other is refused with
// a schema mismatch, and both nodes end up holding the winner's record.
func TestConflictingRegistrationsAtOnceAgreeOnOneSchema(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 2, 16<<20)
	ctx := context.Background()
	for round := range 10 {
		name := fmt.Sprintf("race/%d", round)
		clients := make([]*client.Client, 2)
		for i, nd := range tc.nodes {
			clients[i] = testClientWith(t, client.Config{
				Conn: client.ConnConfig{Seeds: []string{nd.addr}}, Namespace: name, DisableRouting: true,
				Schema: client.Schema{Model: fmt.Sprintf("model-%d", i), Dtype: "bf16", TokensPerChunk: 16},
				Logger: quietLogger(),
			})
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() { _, errs[i] = c.Register(ctx) })
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, transfer.ErrSchemaMismatch):
				t.Fatalf("round %d: client %d: %v, want success or a schema mismatch", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d registrations succeeded (%v), want exactly 1", round, won, errs)
		}
		a, b := tc.nodes[0].svc.Registry.Get(name), tc.nodes[1].svc.Registry.Get(name)
		if a == nil || b == nil || string(a.GetFingerprint()) != string(b.GetFingerprint()) {
			t.Fatalf("round %d: the nodes hold different records: %v / %v", round, a, b)
		}
		for i, c := range clients {
			c.Close()
			if (errs[i] == nil) != (a.GetSchema().GetModel() == fmt.Sprintf("model-%d", i)) {
				t.Fatalf("round %d: client %d's outcome %v disagrees with the record held (%s)", round, i, errs[i], a.GetSchema().GetModel())
			}
		}
	}
}

package handoff

import (
	"context"
	"log/slog"
	"time"

	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// Peers is how the Mover reaches other members (the coordinator, in a
// node).
type Peers interface {
	// Has reports which of ids member m holds sealed now, pinning them
	// there under pin, and the time the pins were granted for.
	Has(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, ids [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error)
	// Copy writes chunks to m with a two-phase write (a chunkcopy.Func:
	// the Mover passes the zero Spread); per chunk nil when this copy was
	// sealed there.
	Copy(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []chunkcopy.Chunk, spread chunkcopy.Spread) []error
	// Unpin releases the pins Has took on m under leases.
	Unpin(ctx context.Context, m ring.Member, leases []uint64)
}

// Config configures a Mover. Fields without a default are required.
type Config struct {
	Self     string
	Store    Store
	Registry *namespace.Registry
	// Ring returns the current ring; it must not block.
	Ring func() *ring.Ring
	// Owners returns the members a chunk placed by key belongs on: the
	// coordinator's write owners (the first r members in ring order that
	// do not drain).
	Owners func(rg *ring.Ring, ns string, key []byte, r int) []ring.Member
	Peers  Peers
	// Spread tells which chunks are spread copies of hot groups that this
	// node keeps (they are neither moved nor evicted while their record
	// lives). Optional: nil keeps none.
	Spread *spread.Table
	// Announce gossips the hand-off summary: the partitions in which this
	// node holds chunks it does not own (membership.SetMoves). It may block
	// for the broadcast. Optional.
	Announce func(ctx context.Context, s moves.Summary) error
	// Rate caps the bytes copied per second (--handoff-rate). Default
	// 256 MiB/s; negative: no cap.
	Rate int64
	// Retry is how soon a pass that left work undone (an owner down, a copy
	// refused) runs again; twice as long after each such pass in a row that
	// did nothing, up to Sweep. Default 5s.
	Retry time.Duration
	// Sweep is how often a pass runs with nothing prompting it, to find
	// chunks with too few holders after changes no ring change reveals (an
	// owner that was unreachable came back). Default 1m; negative: never.
	Sweep time.Duration
	// Quiet is how long the loop waits after a kick for the ring to stop
	// changing before it runs a pass (at most five times as long in all).
	// Default 1s; negative: no wait. Drain and Pass do not wait.
	Quiet time.Duration
	// PublishGap is the least time between two gossips of the hand-off
	// summary by the publish goroutine: the changes writes make meanwhile
	// go out together in the next. Every write to a partition the summary
	// did not name changes it (before the first pass, every new partition
	// written), and each gossip encodes the whole summary, so without a gap
	// a node taking writes on its own spends its CPU re-encoding it (9 % of
	// a fresh node's CPU under a replay). Gossip itself goes out every
	// 200 ms (membership's GossipInterval). Default 100ms; negative: none.
	PublishGap time.Duration
	// Batch is the most chunks per Has or Copy call (a batch also holds at
	// most 8 MiB; two batches run at once). Default 1024.
	Batch int
	// Now is the pacing clock; Sleep waits on it. Defaults: time.Now, a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Log   *slog.Logger
}

// The defaults of Config's settings that kvring serve has flags or node
// fields for: Rate (256 MiB/s), Retry and Sweep.
const (
	DefaultRate  = 256 << 20
	DefaultRetry = 5 * time.Second
	DefaultSweep = time.Minute
)

func (c *Config) setDefaults() {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Retry <= 0 {
		c.Retry = DefaultRetry
	}
	if c.Sweep == 0 {
		c.Sweep = DefaultSweep
	}
	if c.Quiet == 0 {
		c.Quiet = time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 1024
	}
	if c.PublishGap == 0 {
		c.PublishGap = 100 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

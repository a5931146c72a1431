package spread

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Spreader defaults.
const (
	DefaultTTL = 2 * time.Minute
	// MaxTTL caps the keeping time a receiver accepts.
	MaxTTL = time.Hour
	// queueLen is how many hot groups wait for the Spreader; more are
	// dropped (counted) until it catches up.
	queueLen = 64
)

// Config configures a Spreader. Fields without a default are required.
type Config struct {
	Self     string
	Store    Store
	Registry *namespace.Registry
	// Ring returns the current ring; it must not block.
	Ring func() *ring.Ring
	// Owners returns a chunk's write owners (the first r members of the
	// key's ring order that do not drain): a hot group is spread by the
	// first of them only.
	Owners func(rg *ring.Ring, ns string, key []byte, r int) []ring.Member
	// Usable reports whether a member may take copies (not draining, not
	// known to be down). Optional: nil means every member.
	Usable func(id string) bool
	// Copy writes chunks to member m; the Spreader marks them as spread
	// copies of groups spread to Width members, kept there for TTL
	// (chunkcopy.Spread). Per chunk nil when this copy was sealed there
	// (store.ErrAlreadyHeld when m held it). It blocks on the exchange
	// with m. The Spreader owns the chunks' Views and releases them after
	// Copy returns.
	Copy chunkcopy.Func
	// Table records the groups this node spreads (so that its coordinator
	// answers their width).
	Table *Table
	// Width is how many members hold a hot group, its owners included, at
	// most the ring's size. 0 (the default): ring.SpreadWidth of the ring's
	// size, which grows with the cluster (8 up to 64 members, one in 8
	// above).
	Width int
	// TTL is how long members keep a spread group after it was last found
	// hot. Default DefaultTTL, at most MaxTTL.
	TTL time.Duration
	// Now is the clock of the records. Default time.Now.
	Now func() time.Time
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	c.TTL = min(c.TTL, MaxTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Stats are a Spreader's totals since it started.
type Stats struct {
	// Spread counts hot groups this node, their primary owner, copied out.
	Spread uint64
	// Copied counts chunks sealed on spread members; AlreadyHeld those the
	// members held already (their keeping time started over); Failed those
	// a member refused or that failed.
	Copied, AlreadyHeld, Failed uint64
	// Dropped counts hot groups not handled because the queue was full.
	Dropped uint64
}

// Spreader copies hot groups to more members (see the package doc). Create
// with New, then Start; Close stops it and waits for its goroutine. Offer
// and Stats are safe for concurrent use and never block.
type Spreader struct {
	cfg  Config
	q    chan Hot
	stop context.CancelFunc
	wg   sync.WaitGroup

	spread, copied, held, failed, dropped atomic.Uint64
}

// New returns a Spreader; it does nothing until Start (or RunOnce).
func New(cfg Config) *Spreader {
	cfg.setDefaults()
	return &Spreader{cfg: cfg, q: make(chan Hot, queueLen)}
}

// Offer queues a hot group for the Spreader; when the queue is full it is
// dropped (the group is offered again in its next hot window). Never
// blocks.
func (s *Spreader) Offer(h Hot) {
	select {
	case s.q <- h:
	default:
		s.dropped.Add(1)
	}
}

// Start handles offered groups on one goroutine until Close.
func (s *Spreader) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case h := <-s.q:
				s.Spread(ctx, h)
			}
		}
	})
}

// Close stops the goroutine (a copy in progress ends with its context) and
// waits for it. Idempotent.
func (s *Spreader) Close() {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
}

// RunOnce handles the groups queued now on the caller's goroutine and
// returns how many it handled: for tests, and for a Spreader not started.
func (s *Spreader) RunOnce(ctx context.Context) int {
	n := 0
	for {
		select {
		case h := <-s.q:
			s.Spread(ctx, h)
			n++
		default:
			return n
		}
	}
}

// Stats returns the Spreader's totals.
func (s *Spreader) Stats() Stats {
	return Stats{Spread: s.spread.Load(), Copied: s.copied.Load(), AlreadyHeld: s.held.Load(),
		Failed: s.failed.Load(), Dropped: s.dropped.Load()}
}

// Spread copies hot group h to the members of its spread set that are not
// its owners, when this node is the group's primary owner, and records
// that this node spreads it. Blocks on the copies, one member at a time.
func (s *Spreader) Spread(ctx context.Context, h Hot) {
	rec := s.record(h.Key.NS)
	rg := s.cfg.Ring()
	if rec == nil || rg == nil || namespace.GroupSize(rec.GetSchema()) <= 1 {
		return
	}
	replicas := int(max(1, rec.GetReplicationFactor()))
	width := s.cfg.Width
	if width <= 0 {
		width = ring.SpreadWidth(rg.Len())
	}
	width = min(width, rg.Len())
	if width <= replicas {
		return // nothing to spread to
	}
	owners := s.cfg.Owners(rg, rec.GetName(), h.Key.Place[:], replicas)
	if len(owners) == 0 || owners[0].ID != s.cfg.Self {
		return // the primary spreads; others only count
	}
	chunks := s.views(h)
	defer func() {
		for _, c := range chunks {
			c.View.Release()
		}
	}()
	if len(chunks) == 0 {
		return
	}
	s.cfg.Table.Hold(h.Key, width, s.cfg.Now().Add(s.cfg.TTL))
	s.spread.Add(1)
	for _, m := range s.targets(rg, rec.GetName(), h.Key.Place[:], width, owners) {
		s.count(m, s.cfg.Copy(ctx, m, rec, chunks, chunkcopy.Spread{Width: width, TTL: s.cfg.TTL}))
	}
}

// record returns the namespace record whose store name is ns, or nil.
func (s *Spreader) record(ns string) *kvringv1.NamespaceRecord {
	for _, rec := range s.cfg.Registry.List() {
		if namespace.StoreName(rec.GetName(), rec.GetFingerprint()) == ns {
			return rec
		}
	}
	return nil
}

// views reads the sampled chunks of h this node holds.
func (s *Spreader) views(h Hot) []chunkcopy.Chunk {
	var out []chunkcopy.Chunk
	for _, id := range h.IDs {
		v, err := s.cfg.Store.Get(h.Key.NS, id)
		if err != nil {
			continue // evicted since it was asked about, or never held here
		}
		out = append(out, chunkcopy.Chunk{View: v, ID: id, Place: h.Key.Place})
	}
	return out
}

// targets are the members of the key's first width that are not its
// owners and may take copies.
func (s *Spreader) targets(rg *ring.Ring, ns string, key []byte, width int, owners []ring.Member) []ring.Member {
	var out []ring.Member
	for _, m := range rg.SpreadSet(ns, key, width) {
		isOwner := slices.ContainsFunc(owners, func(o ring.Member) bool { return o.ID == m.ID })
		if !isOwner && m.ID != s.cfg.Self && (s.cfg.Usable == nil || s.cfg.Usable(m.ID)) {
			out = append(out, m)
		}
	}
	return out
}

// count adds one member's copy results to the totals.
func (s *Spreader) count(m ring.Member, errs []error) {
	var failed error
	for _, err := range errs {
		switch {
		case err == nil:
			s.copied.Add(1)
		case errors.Is(err, store.ErrAlreadyHeld):
			s.held.Add(1)
		default:
			s.failed.Add(1)
			failed = err
		}
	}
	if failed != nil {
		s.cfg.Log.Debug("spread: a member did not take a copy", "node", m.ID, "err", failed)
	}
}

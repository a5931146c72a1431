package spread

import (
	"sync"
	"time"

	"github.com/kvring/kvring/store"
)

// Hot is a group found hot in one window: its key and a sample of the ids
// the lookups that reached this node asked about under it (at most
// MaxSampledIDs, in the order first asked).
type Hot struct {
	Key Key
	IDs []store.ID
}

// Counter defaults.
const (
	DefaultThreshold = 32
	DefaultWindow    = 10 * time.Second
	// MaxSampledIDs bounds the ids a Hot carries: eight 32-chunk groups'
	// worth of continuations under one key.
	MaxSampledIDs = 256
	// maxCounted bounds the keys counted in one window (about 100 bytes
	// each); keys past it are not counted until the next window.
	maxCounted = 1 << 16
)

// CounterConfig configures a Counter.
type CounterConfig struct {
	// Threshold is how many lookups of one group in one window make it hot.
	// Default DefaultThreshold; negative: never hot (spreading is off).
	Threshold int
	// Window is the counting window. Default DefaultWindow.
	Window time.Duration
	// Now is the window clock. Default time.Now.
	Now func() time.Time
	// Spread, when set, lowers the threshold of a group spread to width w
	// members to Threshold/w (at least 1): once spread, the group's primary
	// owner sees about one lookup in w, and must still find it hot to keep
	// it spread. Optional.
	Spread *Table
	// OnHot receives each group once per window in which it turns hot. It
	// is called with no lock held, on the caller of Asked, and must not
	// block (the Spreader's Offer does not).
	OnHot func(Hot)
}

// Counter counts the lookups that reach this node per group, in fixed
// windows. Safe for concurrent use; Asked takes one mutex for a map update
// per group of the call.
type Counter struct {
	cfg   CounterConfig
	mu    sync.Mutex
	start time.Time
	cur   map[Key]*tally
}

type tally struct {
	n         int
	threshold int // the key's threshold in this window (CounterConfig.Spread)
	fired     bool
	ids       []store.ID
}

// NewCounter returns a Counter.
func NewCounter(cfg CounterConfig) *Counter {
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Counter{cfg: cfg, cur: make(map[Key]*tally)}
}

// Asked counts one lookup of each distinct key among keys (one per id:
// keys[i] places ids[i]) in namespace ns, and samples the ids asked under
// each. The caller keeps ids and keys; Asked copies what it keeps.
func (c *Counter) Asked(ns string, ids, keys [][]byte) {
	if c == nil || c.cfg.Threshold < 0 || len(ids) != len(keys) {
		return
	}
	var hot []Hot
	now := c.cfg.Now()
	c.mu.Lock()
	if now.Sub(c.start) >= c.cfg.Window || now.Before(c.start) {
		c.start, c.cur = now, make(map[Key]*tally, len(c.cur))
	}
	var last *tally
	var lastKey []byte
	for i, raw := range keys {
		if len(raw) != len(store.ID{}) || len(ids[i]) != len(store.ID{}) {
			continue
		}
		t := last
		if last == nil || string(raw) != string(lastKey) {
			k := Key{NS: ns, Place: store.ID(raw)}
			t = c.count(k)
			last, lastKey = t, raw
			if t != nil && !t.fired && t.n >= t.threshold {
				t.fired = true
				hot = append(hot, Hot{Key: k}) // ids filled in below, once this call's are sampled
			}
		}
		// Sampling ends when the key turns hot: later lookups in the window
		// cost one map update.
		if t != nil && (!t.fired || t.n == t.threshold) && len(t.ids) < MaxSampledIDs && !sampled(t.ids, ids[i]) {
			t.ids = append(t.ids, store.ID(ids[i]))
		}
	}
	for i := range hot {
		hot[i].IDs = append([]store.ID(nil), c.cur[hot[i].Key].ids...)
	}
	c.mu.Unlock()
	for _, h := range hot {
		if c.cfg.OnHot != nil {
			c.cfg.OnHot(h)
		}
	}
}

// count adds one lookup of k and returns its tally (nil when the window
// counts too many keys already).
func (c *Counter) count(k Key) *tally {
	t := c.cur[k]
	if t == nil {
		if len(c.cur) >= maxCounted {
			return nil
		}
		t = &tally{threshold: c.cfg.Threshold}
		if w := c.cfg.Spread.Width(k); w > 1 {
			t.threshold = max(1, c.cfg.Threshold/w)
		}
		c.cur[k] = t
	}
	t.n++
	return t
}

func sampled(ids []store.ID, id []byte) bool {
	for _, s := range ids {
		if string(s[:]) == string(id) {
			return true
		}
	}
	return false
}

package loadtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvring/kvring/loadtest/trace"
)

// syntheticMaxTokens bounds every token count of a SyntheticConfig, so that
// no sum of them overflows an int.
const syntheticMaxTokens = 1 << 30

// syntheticPCGStream is the second PCG seed word; the first is the Seed.
const syntheticPCGStream = 0x6b7672696e67 // "kvring"

// SyntheticConfig configures Synthetic. A zero field means its default; a
// zero range ([2]int{0, 0}) means the default range. Ranges are {min, max},
// both inclusive, drawn uniformly.
type SyntheticConfig struct {
	// Seed selects the workload: the same config gives the same requests.
	// Default 0 (itself a valid seed).
	Seed int64
	// Requests is the number of requests generated. Default 2000.
	Requests int
	// SystemPrompts is the number of distinct system prompts. Default 20.
	SystemPrompts int
	// SystemPromptTokens is the range of system prompt lengths. Default
	// {512, 4096}; the minimum may be 0 (no system prompt).
	SystemPromptTokens [2]int
	// Conversations is the number of conversations live at any time.
	// Default 200.
	Conversations int
	// Turns is the range of the number of turns of one conversation.
	// Default {1, 8}; the minimum must be at least 1.
	Turns [2]int
	// UserTokens is the range of user message lengths. Default {32, 512};
	// the minimum must be at least 1.
	UserTokens [2]int
	// AnswerTokens is the range of model answer lengths (the requests'
	// OutputLength). Default {64, 768}; the minimum must be at least 1.
	AnswerTokens [2]int
	// ZipfS is the Zipf exponent of both popularity laws (system prompts and
	// conversations): rank k is chosen with probability proportional to
	// (k+1)^-ZipfS. Default 1.1; it must be greater than 1.
	ZipfS float64
	// Rate is the mean arrival rate in requests per second (Poisson
	// arrivals). Default 5.
	Rate float64
	// MaxPromptTokens caps the prompt length: a conversation whose next
	// prompt would be longer ends instead. Default 32768; it must be at
	// least SystemPromptTokens max + UserTokens max and at least
	// AnswerTokens max. No token count may exceed 2^30.
	MaxPromptTokens int
}

func (c SyntheticConfig) withDefaults() SyntheticConfig {
	if c.Requests == 0 {
		c.Requests = 2000
	}
	if c.SystemPrompts == 0 {
		c.SystemPrompts = 20
	}
	if c.SystemPromptTokens == [2]int{} {
		c.SystemPromptTokens = [2]int{512, 4096}
	}
	if c.Conversations == 0 {
		c.Conversations = 200
	}
	if c.Turns == [2]int{} {
		c.Turns = [2]int{1, 8}
	}
	if c.UserTokens == [2]int{} {
		c.UserTokens = [2]int{32, 512}
	}
	if c.AnswerTokens == [2]int{} {
		c.AnswerTokens = [2]int{64, 768}
	}
	if c.ZipfS == 0 {
		c.ZipfS = 1.1
	}
	if c.Rate == 0 {
		c.Rate = 5
	}
	if c.MaxPromptTokens == 0 {
		c.MaxPromptTokens = 32768
	}
	return c
}

// validate checks a config with its defaults applied; each error names the
// field at fault.
func (c SyntheticConfig) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"Requests", c.Requests}, {"SystemPrompts", c.SystemPrompts}, {"Conversations", c.Conversations}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		r    [2]int
		min  int
	}{{"SystemPromptTokens", c.SystemPromptTokens, 0}, {"Turns", c.Turns, 1},
		{"UserTokens", c.UserTokens, 1}, {"AnswerTokens", c.AnswerTokens, 1}} {
		switch {
		case f.r[0] < f.min:
			errs = append(errs, fmt.Errorf("%s min must be at least %d, got %d", f.name, f.min, f.r[0]))
		case f.r[0] > f.r[1]:
			errs = append(errs, fmt.Errorf("%s min %d is greater than max %d", f.name, f.r[0], f.r[1]))
		case f.r[1] > syntheticMaxTokens:
			errs = append(errs, fmt.Errorf("%s max must be at most %d, got %d", f.name, syntheticMaxTokens, f.r[1]))
		}
	}
	if !(c.ZipfS > 1) || math.IsInf(c.ZipfS, 1) {
		errs = append(errs, fmt.Errorf("field ZipfS must be finite and greater than 1, got %v", c.ZipfS))
	}
	if !(c.Rate > 0) || math.IsInf(c.Rate, 1) {
		errs = append(errs, fmt.Errorf("field Rate must be finite and positive, got %v", c.Rate))
	}
	switch {
	case c.MaxPromptTokens < 1 || c.MaxPromptTokens > syntheticMaxTokens:
		errs = append(errs, fmt.Errorf("field MaxPromptTokens must be in [1, %d], got %d", syntheticMaxTokens, c.MaxPromptTokens))
	case c.MaxPromptTokens-c.UserTokens[1] < c.SystemPromptTokens[1]:
		errs = append(errs, fmt.Errorf("field MaxPromptTokens %d is less than SystemPromptTokens max + UserTokens max (%d + %d)",
			c.MaxPromptTokens, c.SystemPromptTokens[1], c.UserTokens[1]))
	case c.MaxPromptTokens < c.AnswerTokens[1]:
		errs = append(errs, fmt.Errorf("field MaxPromptTokens %d is less than AnswerTokens max %d", c.MaxPromptTokens, c.AnswerTokens[1]))
	}
	return errors.Join(errs...)
}

// Synthetic generates a shared-prefix chat workload in the Mooncake format, to
// be replayed by ReplayMooncake like a trace file.
//
// The model: SystemPrompts system prompts, their lengths drawn from
// SystemPromptTokens, and Conversations live conversations, each bound to one
// system prompt chosen with Zipf(ZipfS) popularity. Each request picks a
// conversation with Zipf(ZipfS) popularity (by slot rank) and is its next turn:
// the prompt is the system prompt, every earlier turn (user message and model
// answer) and a new user message, with lengths drawn from UserTokens and
// AnswerTokens; the OutputLength is the answer, which joins the conversation
// for its next turn. A conversation lasts a number of turns drawn from Turns,
// or ends earlier when its next prompt would exceed MaxPromptTokens; a fresh
// conversation then takes its slot (and popularity), so the working set moves.
// Arrivals are Poisson at Rate requests per second; the first is at 0.
//
// Block ids follow Mooncake: HashIDs[i] names the tokens of block i and of
// every block before it, and ids are small integers in first-seen order. They
// are derived from the token content: two requests share their first k ids
// exactly when their first k×512 tokens are the same (system prompt and turn
// texts are distinct from one another), and a final partial block gets an id
// of its own, distinct from any block with other content.
//
// The output is a function of cfg alone. Synthetic is safe for concurrent use
// and does not block; it returns an error naming the field when cfg is
// invalid. The caller owns the returned requests.
func Synthetic(cfg SyntheticConfig) ([]trace.Request, error) {
	reqs, err := synthesize(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]trace.Request, len(reqs))
	for i := range reqs {
		out[i] = reqs[i].Request
	}
	return out, nil
}

// synthRequest is a generated request with the facts tests check it against.
type synthRequest struct {
	trace.Request
	conv int            // conversation number, in order of creation
	turn int            // 0 for the first turn
	sys  int            // system prompt index
	segs []synthSegment // the prompt's text, in order
}

// synthSegment is one text of a prompt: a system prompt, a user message or an
// answer. Texts with different keys have different content.
type synthSegment struct {
	key    uint64 // system prompt k has key k; turn texts follow
	tokens int
}

// synthConv is a live conversation.
type synthConv struct {
	id        int
	sys       int
	turn      int // turns done
	turnsLeft int
	segs      []synthSegment // system prompt, then every finished turn's texts
	tokens    int            // sum of segs' tokens
}

// synthGen holds the state of one Synthetic call.
type synthGen struct {
	cfg       SyntheticConfig
	rng       *rand.Rand
	sysZipf   *rand.Zipf
	convZipf  *rand.Zipf
	sysTokens []int
	nextKey   uint64 // key of the next turn text
	nextConv  int
	ids       synthBlockIDs
}

// synthesize validates cfg and generates its requests.
func synthesize(cfg SyntheticConfig) ([]synthRequest, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cannot generate the synthetic workload: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), syntheticPCGStream))
	g := &synthGen{
		cfg:       cfg,
		rng:       rng,
		sysZipf:   rand.NewZipf(rng, cfg.ZipfS, 1, uint64(cfg.SystemPrompts-1)),
		convZipf:  rand.NewZipf(rng, cfg.ZipfS, 1, uint64(cfg.Conversations-1)),
		sysTokens: make([]int, cfg.SystemPrompts),
		nextKey:   uint64(cfg.SystemPrompts),
		ids:       synthBlockIDs{ids: make(map[string]int64)},
	}
	if g.sysZipf == nil || g.convZipf == nil {
		panic("BUG: rand.NewZipf rejected a validated config")
	}
	for i := range g.sysTokens {
		g.sysTokens[i] = g.draw(cfg.SystemPromptTokens)
	}

	slots := make([]*synthConv, cfg.Conversations)
	out := make([]synthRequest, cfg.Requests)
	var at float64 // seconds
	for i := range out {
		if i > 0 {
			at += g.rng.ExpFloat64() / cfg.Rate
		}
		if at*float64(time.Second) >= math.MaxInt64 {
			return nil, fmt.Errorf("cannot generate the synthetic workload: Rate %v is too low for %d Requests: "+
				"timestamps overflow", cfg.Rate, cfg.Requests)
		}
		slot := g.convZipf.Uint64()
		c := slots[slot]
		if c == nil || c.turnsLeft == 0 {
			c = g.newConv()
		}
		user := g.draw(cfg.UserTokens)
		if c.tokens+user > cfg.MaxPromptTokens {
			c = g.newConv() // its first turn fits: validate checked
		}
		slots[slot] = c
		answer := g.draw(cfg.AnswerTokens)

		c.segs = append(c.segs, g.segment(user))
		c.tokens += user
		out[i] = synthRequest{
			Request: trace.Request{
				Timestamp:    time.Duration(at * float64(time.Second)),
				InputLength:  c.tokens,
				OutputLength: answer,
				HashIDs:      g.ids.blocks(c.segs, c.tokens),
			},
			conv: c.id, turn: c.turn, sys: c.sys, segs: slices.Clone(c.segs),
		}
		c.segs = append(c.segs, g.segment(answer))
		c.tokens += answer
		c.turn++
		c.turnsLeft--
	}
	return out, nil
}

// newConv starts a conversation on a system prompt chosen by popularity.
func (g *synthGen) newConv() *synthConv {
	sys := int(g.sysZipf.Uint64())
	c := &synthConv{id: g.nextConv, sys: sys, turnsLeft: g.draw(g.cfg.Turns),
		segs: []synthSegment{{key: uint64(sys), tokens: g.sysTokens[sys]}}, tokens: g.sysTokens[sys]}
	g.nextConv++
	return c
}

// segment returns a new turn text of n tokens.
func (g *synthGen) segment(n int) synthSegment {
	s := synthSegment{key: g.nextKey, tokens: n}
	g.nextKey++
	return s
}

// draw returns a uniform integer in [r[0], r[1]].
func (g *synthGen) draw(r [2]int) int {
	return r[0] + g.rng.IntN(r[1]-r[0]+1)
}

// synthBlockIDs assigns Mooncake-style block ids: one small integer per
// distinct token prefix ending at a block boundary (or at the end of a
// prompt), in first-seen order. Not safe for concurrent use.
type synthBlockIDs struct {
	ids map[string]int64 // prefix signature -> id
	buf []byte
}

// blocks returns the ids of the trace.BlocksFor(tokens) blocks of a prompt
// made of segs, whose token counts add up to tokens.
//
// The signature of block i is the id of block i-1 (which stands for every
// token before the block) followed by the pieces of text in the block, each as
// (segment key, first token, end token). Segments hold distinct texts, so two
// signatures are equal exactly when the prefixes they end are equal.
func (b *synthBlockIDs) blocks(segs []synthSegment, tokens int) []int64 {
	out := make([]int64, 0, trace.BlocksFor(tokens))
	prev := int64(-1)
	seg, off := 0, 0 // the next token is token off of segs[seg]
	for start := 0; start < tokens; start += trace.BlockTokens {
		key := binary.AppendVarint(b.buf[:0], prev)
		for n := min(trace.BlockTokens, tokens-start); n > 0; {
			s := segs[seg]
			if take := min(n, s.tokens-off); take > 0 {
				key = binary.AppendUvarint(key, s.key)
				key = binary.AppendUvarint(key, uint64(off))
				key = binary.AppendUvarint(key, uint64(off+take))
				off += take
				n -= take
			}
			if off == s.tokens {
				seg, off = seg+1, 0
			}
		}
		b.buf = key
		id, ok := b.ids[string(key)]
		if !ok {
			id = int64(len(b.ids))
			b.ids[string(key)] = id
		}
		out = append(out, id)
		prev = id
	}
	return out
}

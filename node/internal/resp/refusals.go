package resp

import (
	"slices"
	"sync"
	"time"
)

// LMCache never waits on its puts: a SET the port refuses is seen by no
// one unless the node says so. Every error reply is counted by reason
// (conn.fail); an error reply to a command that stores values is also
// logged at WARN, at most once per namespace and reason a minute
// (refusalWarnEvery), naming the namespace, the reason and the reply.

// refusalWarnEvery is how often one namespace's refusals of one reason are
// logged at most.
const refusalWarnEvery = time.Minute

// maxWarnKeys bounds the namespace and reason pairs the limiter remembers:
// a NOPERM refusal names whatever namespace a client's key maps to.
const maxWarnKeys = 4096

// maxWarnLines bounds the lines of all keys together per refusalWarnEvery,
// so a client that writes to many namespaces cannot flood the log.
const maxWarnLines = 64

// warnKey is what a WARN line is rate-limited by.
type warnKey struct{ namespace, reason string }

// warnState is the last line of a key, and the refusals not logged since.
type warnState struct {
	at         time.Time
	suppressed int64
}

// warnings rate-limits WARN lines by key: at most one per key per every,
// and at most lines of all keys together per every (a line over that is
// dropped, and counted as not logged when its key is remembered). It
// remembers at most max keys: when full, the keys whose next line would be
// allowed anyway are forgotten, and a new key finds no room while none are
// (its line is dropped; the counters still count it). Safe for concurrent
// use.
type warnings struct {
	every      time.Duration
	max, lines int

	mu     sync.Mutex
	last   map[warnKey]*warnState
	window time.Time // the start of the current every, for lines
	logged int       // the lines of the current window
}

func newWarnings(every time.Duration, max, lines int) *warnings {
	return &warnings{every: every, max: max, lines: lines, last: map[warnKey]*warnState{}}
}

// ok reports whether a line for k may be logged at now, and if so how many
// of k's were not logged since its last line.
func (w *warnings) ok(k warnKey, now time.Time) (bool, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.window) >= w.every {
		w.window, w.logged = now, 0
	}
	if w.logged >= w.lines {
		if st := w.last[k]; st != nil {
			st.suppressed++
		}
		return false, 0
	}
	ok, n := w.keyOK(k, now)
	if ok {
		w.logged++
	}
	return ok, n
}

// keyOK is ok for k alone. The caller holds mu.
func (w *warnings) keyOK(k warnKey, now time.Time) (bool, int64) {
	st := w.last[k]
	if st == nil {
		if len(w.last) >= w.max {
			for key, s := range w.last {
				if now.Sub(s.at) >= w.every {
					delete(w.last, key)
				}
			}
			if len(w.last) >= w.max {
				return false, 0
			}
		}
		w.last[k] = &warnState{at: now}
		return true, 0
	}
	if now.Sub(st.at) < w.every {
		st.suppressed++
		return false, 0
	}
	n := st.suppressed
	st.at, st.suppressed = now, 0
	return true, n
}

// storesValues reports whether command name stores values (its refusals
// are logged): SET, SETNX, MSET, MSETNX.
func storesValues(name string) bool {
	return slices.Contains(commands[name].flags, "denyoom")
}

// warnRefusal logs, rate-limited, that the command in flight was refused
// with reason: in namespace c.refusedNS, the namespace of the key it was
// refused for (unknown before its keys were mapped: then nothing is
// logged; the counter counts it).
func (c *conn) warnRefusal(reason, msg string) {
	if c.refusedNS == "" || !storesValues(c.lastCmd) {
		return
	}
	ok, suppressed := c.s.warned.ok(warnKey{c.refusedNS, reason}, c.s.cfg.Now())
	if !ok {
		return
	}
	c.s.log.Warn("Redis-protocol write refused: the value is not stored", "namespace", c.refusedNS, "reason", reason,
		"command", c.lastCmd, "reply", clipText(msg), "client", c.client, "not_logged_since_last", suppressed)
}

// clipText shortens an error reply for a log line.
func clipText(s string) string {
	const max = 256
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

package launch

import (
	"sync"
	"time"
)

// lineLog is a process's output lines, which waiters are woken for as
// they come. Safe for concurrent use.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced when a line is added
	closed  bool          // the process has exited and every line is in
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	close(l.changed)
	l.changed = make(chan struct{})
}

// close says no line will come anymore.
func (l *lineLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *lineLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// await waits until a line from index seen on satisfies match, and
// returns it; nil when the output ended first (exited) or timeout passed.
// It wakes on each new line, not on a timer.
func (l *lineLog) await(seen int, match func(string) bool, timeout time.Duration) (line *string, exited bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if match(l.lines[seen]) {
				line := l.lines[seen]
				l.mu.Unlock()
				return &line, false
			}
		}
		changed, closed := l.changed, l.closed
		l.mu.Unlock()
		if closed {
			return nil, true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return nil, false
		}
	}
}

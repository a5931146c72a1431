package testutil

import (
	"log/slog"
	"strings"
	"sync"
)

// Logs is a log sink tests read back; safe for concurrent use.
type Logs struct {
	mu  sync.Mutex
	buf strings.Builder
}

// Write appends p.
func (b *Logs) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Lines returns the log lines that contain every one of parts.
func (b *Logs) Lines(parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// String returns everything logged so far.
func (b *Logs) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a text logger at debug level that writes to b.
func (b *Logs) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Count returns how many log lines contain every one of parts.
func (b *Logs) Count(parts ...string) int { return len(b.Lines(parts...)) }

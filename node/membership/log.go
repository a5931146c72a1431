package membership

import (
	"context"
	"log/slog"
	"strings"
)

// memberlistLog turns memberlist's log lines ("[LEVEL] memberlist: message") into slog records, one level
// lower than memberlist's own: its [ERR] lines (a failed probe, a push/pull that timed out) are routine in a
// cluster where nodes come and go, so they become Warn; [WARN] becomes Info; [INFO] and [DEBUG] become Debug.
// Lines about a refused peer become Debug too: memberlist repeats them every gossip round, and the ring
// goroutine logs each refusal once, at Error.
//
// A line saying this node's probe of a member failed is also passed to suspect (if set), with the member's
// name and the time: the only sign memberlist gives of a suspicion (suspect.go). A line saying a direct
// ping of a member got no ack is passed to pingFailed (if set): the only sign it gives that this node cannot
// reach a member that others still reach (reach.go). Neither callback may block.
type memberlistLog struct {
	log        *slog.Logger
	suspect    func(name string)
	pingFailed func(name string)
}

func (w memberlistLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	for _, l := range []struct {
		prefix string
		level  slog.Level
	}{
		{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelDebug}, {"[WARN]", slog.LevelInfo},
		{"[ERR]", slog.LevelWarn}, {"[ERROR]", slog.LevelWarn},
	} {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			line, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if name, ok := suspectedIn(line); ok && w.suspect != nil {
		w.suspect(name)
	}
	if name, ok := failedPingIn(line); ok && w.pingFailed != nil {
		w.pingFailed(name)
	}
	if strings.Contains(line, errPeerRefused.Error()) {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if w.log.Enabled(ctx, level) {
		w.log.Log(ctx, level, line)
	}
	return len(p), nil
}

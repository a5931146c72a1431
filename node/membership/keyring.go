package membership

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
)

// Gossip encryption. With Config.Keys set, memberlist seals every gossip
// message (UDP packets and TCP push/pull streams) with AES-GCM under the
// first key and opens what it receives with any key of the ring. A member
// without a key of the ring can neither read the cluster's gossip nor be
// heard: its packets are dropped and its joins fail, so it never becomes a
// member and is never sent chunks.
//
// Rotation without a split, one rolling restart per step:
//  1. every node gets [old, new]: still sends under old, already opens new;
//  2. every node gets [new, old]: sends under new, still opens old;
//  3. every node gets [new]: old is gone.

// ParseKeys reads gossip keys from a key file's contents: one base64
// (standard encoding) key per line, each 16, 24 or 32 bytes once decoded
// (AES-128, -192 or -256); the first is the primary. Blank lines and lines
// starting with # are skipped. Generate a key with
// `head -c 32 /dev/urandom | base64`.
func ParseKeys(b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("gossip key on line %d is not base64: %w", line, err)
		}
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("gossip key on line %d: %w", line, err)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read gossip keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no gossip key found (want one base64 key per line)")
	}
	return keys, nil
}

func checkKey(k []byte) error {
	switch len(k) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("want 16, 24 or 32 bytes, got %d", len(k))
}

// checkKeys validates Config.Keys (none is valid: no encryption).
func checkKeys(keys [][]byte) error {
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("gossip key %d: %w", i, err)
		}
	}
	return nil
}

// newKeyring returns memberlist's keyring for keys (nil for none).
func newKeyring(keys [][]byte) (*memberlist.Keyring, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, fmt.Errorf("cannot build the gossip keyring: %w", err)
	}
	return kr, nil
}

// keyErrorPatterns are memberlist's log lines for a message this node could
// not open: sealed under a key it does not have, or not sealed while it
// requires sealing (and the reverse, when this node has no keys).
var keyErrorPatterns = []string{
	"no installed keys could decrypt the message",
	"encryption is configured but remote state is not encrypted",
	"remote state is encrypted and encryption is not configured",
	"Decrypt packet failed",
}

// maxKeyErrorHosts bounds the hosts a keyErrorLog remembers; past it,
// further hosts are logged at Debug only.
const maxKeyErrorHosts = 1024

var fromRe = regexp.MustCompile(`from=(\S+)`)

// keyErrorLog sits in front of memberlist's log: a line saying a message
// could not be opened is logged once per sending host, at Error, as a
// refusal naming the host; memberlist repeats it on every packet and every
// join attempt, and the repeats go to Debug. Other lines pass to next.
type keyErrorLog struct {
	log  *slog.Logger
	next io.Writer

	mu   sync.Mutex
	seen map[string]bool
}

func newKeyErrorLog(log *slog.Logger, next io.Writer) *keyErrorLog {
	return &keyErrorLog{log: log, next: next, seen: make(map[string]bool)}
}

func (k *keyErrorLog) Write(p []byte) (int, error) {
	line := string(p)
	matched := false
	for _, pat := range keyErrorPatterns {
		if strings.Contains(line, pat) {
			matched = true
			break
		}
	}
	if !matched {
		return k.next.Write(p)
	}
	host := "unknown"
	if m := fromRe.FindStringSubmatch(line); m != nil {
		host = m[1]
		if h, _, err := net.SplitHostPort(m[1]); err == nil {
			host = h // TCP pushes come from ephemeral ports: one line per host
		}
	}
	k.mu.Lock()
	first := !k.seen[host] && len(k.seen) < maxKeyErrorHosts
	if first {
		k.seen[host] = true
	}
	k.mu.Unlock()
	reason := strings.TrimSpace(line)
	if first {
		k.log.Error("refusing gossip from a host without the cluster's gossip key (logged once per host)",
			"host", host, "reason", reason)
	} else if k.log.Enabled(context.Background(), slog.LevelDebug) {
		k.log.Debug("refused gossip message", "host", host, "reason", reason)
	}
	return len(p), nil
}

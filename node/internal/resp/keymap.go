package resp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kvring/kvring/store"
)

// NamespacePrefix starts the name of every namespace a Redis key maps to,
// so that the admin commands tell them apart from the SDK's namespaces.
const NamespacePrefix = "resp:"

// maxNamespaceName is the longest namespace name a key maps to: the
// registry's limit (store.MaxNamespaceLen less the fingerprint suffix).
const maxNamespaceName = store.MaxNamespaceLen - 17

// KeyMap maps a Redis key to the namespace, chunk id and placement key it
// is stored under. Zero fields take the documented defaults; the mapping must
// be the same on every node of a cluster (it decides where values live).
type KeyMap struct {
	// Separator splits a key into fields; the fields that name a model and
	// worker make its namespace, per-chunk fields never do
	// (appendNSFields). LMCache's chunk keys, "model@world size@worker
	// id@chunk hash@dtype" and the older "vllm@model@world size@worker
	// id@chunk hash", map to one namespace per model, worker and dtype.
	// Required (DefaultKeyMap's is "@").
	Separator string
	// Default is the namespace (after NamespacePrefix) of keys without a
	// Separator. Default "default".
	Default string
	// Siblings are key suffixes whose keys are placed with the key that
	// lacks them: "<k>kv_bytes" and "<k>metadata" land on the owners of
	// "<k>", so a value and its metadata live and die together. Default
	// LMCache's, "kv_bytes" and "metadata". A key with a Redis Cluster hash
	// tag ({...}) is placed by its tag instead, and in Redis Cluster mode
	// every key by its slot (siblings share owners only through a tag).
	Siblings []string
}

// DefaultKeyMap is LMCache's layout.
func DefaultKeyMap() KeyMap {
	return KeyMap{Separator: "@", Default: "default", Siblings: []string{"kv_bytes", "metadata"}}
}

func (m *KeyMap) setDefaults() {
	d := DefaultKeyMap()
	if m.Separator == "" && m.Default == "" && m.Siblings == nil {
		*m = d // the zero KeyMap is the default one
		return
	}
	if m.Default == "" {
		m.Default = d.Default
	}
	if m.Siblings == nil {
		m.Siblings = d.Siblings
	}
}

func (m KeyMap) validate() error {
	if m.Separator == "" {
		return fmt.Errorf("resp key map: the namespace separator is empty")
	}
	if err := store.ValidateNamespace(NamespacePrefix + m.Default); err != nil {
		return fmt.Errorf("resp key map: default namespace %q: %w", m.Default, err)
	}
	for _, s := range m.Siblings {
		if s == "" {
			return fmt.Errorf("resp key map: a sibling suffix is empty")
		}
	}
	return nil
}

// Key is where a Redis key lives.
type Key struct {
	// Namespace is the kvring namespace the key belongs to.
	Namespace string
	// ID is the chunk id: SHA-256 of the whole key, so distinct keys are
	// distinct chunks whatever namespace they share.
	ID store.ID
	// Place is the placement key: SHA-256 of the key's hash tag, or of the
	// key without its sibling suffix, under a label. In Redis Cluster mode
	// the server replaces it with the one of PlaceSlot (Cluster.SlotPlace).
	Place store.ID
	// Slot is the key's Redis Cluster hash slot: the node that is its
	// primary answers it (-MOVED otherwise).
	Slot uint16
	// PlaceSlot is the slot whose owners hold the key in Redis Cluster
	// mode: the key's own slot, but for a sibling key (LMCache's
	// "<k>metadata") the slot of its first sibling ("<k>kv_bytes"), so a
	// value and its metadata share their holders without a hash tag.
	PlaceSlot uint16
	// Name is the key itself, kept with its chunk for SCAN.
	Name string
}

// Probe is a key whose presence is asked (Cluster.Held), with the sibling
// keys it needs (KeyMap.Needs: its kv_bytes for its metadata), which share
// its holders: the key counts only while they are held too, and a lease
// pins them with it.
type Probe struct {
	Key
	Pin []Key
}

// Map maps key. It never fails: every byte string is a key.
func (m KeyMap) Map(key []byte) Key {
	place := m.placement(key)
	return Key{Namespace: m.Namespace(key), ID: m.ID(key), Place: placeKey(place), Slot: Slot(key),
		PlaceSlot: m.placeSlot(key), Name: string(key)}
}

// Companions are the chunk ids evicted with the chunk of key name
// (store.Config.Companions): for a key with the first sibling suffix
// ("<k>kv_bytes"), its other siblings ("<k>metadata"), so that no metadata
// outlives the bytes it describes; none for any other key.
func (m KeyMap) Companions(name string) []store.ID {
	if len(m.Siblings) == 0 || !strings.HasSuffix(name, m.Siblings[0]) {
		return nil
	}
	var out []store.ID
	for _, sib := range m.SiblingKeys([]byte(name)) {
		out = append(out, m.ID(sib))
	}
	return out
}

// SiblingKeys are the other sibling keys of key ("<k>kv_bytes" for
// "<k>metadata"), none for a key without a sibling suffix.
func (m KeyMap) SiblingKeys(key []byte) [][]byte {
	stem := m.stem(key)
	if len(stem) == len(key) {
		return nil
	}
	var out [][]byte
	for _, s := range m.Siblings {
		if !bytes.HasSuffix(key, []byte(s)) || len(key) != len(stem)+len(s) {
			out = append(out, append(append([]byte(nil), stem...), s...))
		}
	}
	return out
}

// Needs are the keys that must be held for key to be read as its client
// reads it: for a key with a later sibling suffix ("<k>metadata"), the key
// with the first ("<k>kv_bytes"), which it describes; none for any other
// key (a "<k>kv_bytes" stands alone: LMCache asks whether a chunk exists by
// its metadata, and reads the bytes after it).
func (m KeyMap) Needs(key []byte) [][]byte {
	if len(m.Siblings) < 2 || bytes.HasSuffix(key, []byte(m.Siblings[0])) {
		return nil
	}
	stem := m.stem(key)
	if len(stem) == len(key) {
		return nil
	}
	return [][]byte{append(append([]byte(nil), stem...), m.Siblings[0]...)}
}

// InNamespace returns k moved to namespace name (the default namespace a
// write falls back to): its id and placement stay.
func (k Key) InNamespace(name string) Key {
	k.Namespace = name
	return k
}

// ID is key's chunk id (Key.ID).
func (m KeyMap) ID(key []byte) store.ID { return sha256.Sum256(key) }

// DefaultNamespace is the namespace of keys without a separator, and the one
// a write falls back to when its own namespace cannot be created.
func (m KeyMap) DefaultNamespace() string {
	if m.Default == "" {
		return NamespacePrefix + DefaultKeyMap().Default
	}
	return NamespacePrefix + m.Default
}

// Namespace is the namespace of key: NamespacePrefix and the fields of key
// that name its model and worker (appendNSFields), joined by ':', with each byte
// the registry does not allow in a name replaced by '_' (two keys that
// differ only there share a namespace, which is harmless: ids stay
// distinct). A name too long for the registry keeps its start and a hash of
// the whole.
func (m KeyMap) Namespace(key []byte) string {
	var buf [256]byte
	return m.name(m.appendNSFields(buf[:0], key))
}

// name is the namespace whose fields are f (appendNSFields; empty: the
// default namespace).
func (m KeyMap) name(f []byte) string {
	if len(f) == 0 {
		return m.DefaultNamespace()
	}
	var b bytes.Buffer
	b.Grow(len(NamespacePrefix) + len(f))
	b.WriteString(NamespacePrefix)
	sep := []byte(m.Separator)
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case bytes.HasPrefix(f[i:], sep):
			b.WriteByte(':')
			i += len(sep) - 1
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '.' || c == '_' || c == ':' || c == '/' || c == '-' || c == '=' || c == '+':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > maxNamespaceName {
		sum := sha256.Sum256(f)
		tag := "=" + hex.EncodeToString(sum[:6])
		name = name[:maxNamespaceName-len(tag)] + tag
	}
	return name
}

// placement is the part of key that decides its owners.
func (m KeyMap) placement(key []byte) []byte {
	if tag, ok := HashTag(key); ok {
		return tag
	}
	for _, s := range m.Siblings {
		if stem, ok := bytes.CutSuffix(key, []byte(s)); ok && len(stem) > 0 {
			return stem
		}
	}
	return key
}

// HashTag returns the hash tag of key as Redis Cluster defines it: the bytes
// between the first '{' and the next '}', when that is not empty.
func HashTag(key []byte) ([]byte, bool) {
	s := bytes.IndexByte(key, '{')
	if s < 0 {
		return nil, false
	}
	e := bytes.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return nil, false
	}
	return key[s+1 : s+1+e], true
}

// placeKey labels a placement string so it can never equal a chunk id that
// an SDK client computed from tokens.
func placeKey(p []byte) store.ID {
	h := sha256.New()
	h.Write([]byte("kvring resp placement\x00"))
	h.Write(p)
	var id store.ID
	h.Sum(id[:0])
	return id
}

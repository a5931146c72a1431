package resp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

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
	// Separator splits a key's namespace from the rest: the namespace is
	// everything before the key's last Separator. LMCache's chunk keys,
	// "fmt@model@world size@worker id@chunk hash", map to one namespace per
	// model and worker. Required (DefaultKeyMap's is "@").
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
	// the server replaces it with its slot's (Cluster.SlotPlace).
	Place store.ID
	// Slot is the key's Redis Cluster hash slot.
	Slot uint16
	// Name is the key itself, kept with its chunk for SCAN.
	Name string
}

// Map maps key. It never fails: every byte string is a key.
func (m KeyMap) Map(key []byte) Key {
	return Key{Namespace: m.Namespace(key), ID: m.ID(key), Place: placeKey(m.placement(key)), Slot: Slot(key),
		Name: string(key)}
}

// ID is key's chunk id (Key.ID).
func (m KeyMap) ID(key []byte) store.ID { return sha256.Sum256(key) }

// prefix is the part of key that decides its namespace (Namespace): nil
// for a key in the default namespace.
func (m KeyMap) prefix(key []byte) []byte {
	if i := bytes.LastIndex(key, []byte(m.Separator)); i > 0 {
		return key[:i]
	}
	return nil
}

// Namespace is the namespace of key: NamespacePrefix and the part before the
// last Separator, with each byte the registry does not allow in a name
// replaced by '_' and '@' by ':' (two prefixes that differ only there share
// a namespace, which is harmless: ids stay distinct). A prefix too long for
// a name keeps its start and a hash of the whole.
func (m KeyMap) Namespace(key []byte) string {
	p := m.prefix(key)
	if p == nil {
		return NamespacePrefix + m.Default
	}
	i := len(p)
	var b bytes.Buffer
	b.Grow(len(NamespacePrefix) + i)
	b.WriteString(NamespacePrefix)
	for _, c := range key[:i] {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '.' || c == '_' || c == ':' || c == '/' || c == '-' || c == '=' || c == '+':
			b.WriteByte(c)
		case c == '@':
			b.WriteByte(':')
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > maxNamespaceName {
		sum := sha256.Sum256(key[:i])
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

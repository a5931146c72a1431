package store

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// IDSize is the length of a chunk id in bytes (SHA-256 chain).
const IDSize = 32

// MaxNamespaceLen is the longest namespace name accepted.
const MaxNamespaceLen = 128

// ID names a chunk within a namespace.
type ID [IDSize]byte

// String returns the id as lowercase hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID converts a byte slice of exactly IDSize bytes into an ID.
func ParseID(b []byte) (ID, error) {
	var id ID
	if len(b) != IDSize {
		return id, fmt.Errorf("%w: chunk id must be %d bytes, got %d", ErrInvalid, IDSize, len(b))
	}
	copy(id[:], b)
	return id, nil
}

// ParseHexID parses a 64-character hex chunk id.
func ParseHexID(s string) (ID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return ID{}, fmt.Errorf("%w: chunk id %q is not hex: %v", ErrInvalid, s, err)
	}
	return ParseID(b)
}

// ValidateNamespace reports whether name is a well-formed namespace: 1 to
// MaxNamespaceLen characters from [A-Za-z0-9._:/=+-].
func ValidateNamespace(name string) error {
	if name == "" {
		return fmt.Errorf("%w: namespace is empty", ErrInvalid)
	}
	if len(name) > MaxNamespaceLen {
		return fmt.Errorf("%w: namespace is %d bytes, longer than %d", ErrInvalid, len(name), MaxNamespaceLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '/' || c == '-' || c == '=' || c == '+':
		default:
			return fmt.Errorf("%w: namespace %q has character %q at %d (allowed: letters, digits, . _ : / - = +)", ErrInvalid, name, c, i)
		}
	}
	return nil
}

// chunkKey identifies a chunk inside the store: an interned namespace number
// and the chunk id.
type chunkKey struct {
	ns uint32
	id ID
}

// hash is the 64-bit key of the chunk in the index and in the policy.
func (k chunkKey) hash() uint64 {
	var b [4 + IDSize]byte
	binary.LittleEndian.PutUint32(b[:4], k.ns)
	copy(b[4:], k.id[:])
	return xxhash.Sum64(b[:])
}

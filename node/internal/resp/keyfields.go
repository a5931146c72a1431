package resp

import "bytes"

// maxFields is the most fields of a key appendNSFields tells apart: past it, the
// rest of the key is one field.
const maxFields = 32

// keyField is a field of a key: key[off:end].
type keyField struct{ off, end int }

// appendNSFields appends to dst the fields of key that name its namespace,
// joined by the separator, and returns dst; nothing for a key of the
// default namespace (no separator). Which fields:
//
//   - A sibling suffix (kv_bytes, metadata) is cut from the key first.
//   - An LMCache chunk key has two decimal fields (world size, worker id)
//     after at least one other (the model) and a chunk hash right after
//     them (hex digits, maybe with a '-'): "model@1@0@<hash>@bfloat16",
//     "vllm@model@1@0@<hash>". Its fields are every field but the hash,
//     and but a layer id (decimal) right after the field that follows the
//     hash (LMCache's layer-wise keys: "model@1@0@<hash>@bfloat16@3").
//     Tags ("@user%alice") stay.
//   - Any other key: every field before the last separator (the last one
//     names the value), without the fields that look like a hash (16 hex
//     digits or more).
//
// So no per-chunk field of LMCache's layouts lands in a namespace name.
func (m KeyMap) appendNSFields(dst, key []byte) []byte {
	key = m.stem(key)
	var arr [maxFields]keyField
	fs := splitFields(arr[:0], key, []byte(m.Separator))
	if len(fs) < 2 {
		return dst
	}
	start := len(dst)
	add := func(f keyField) {
		if len(dst) > start {
			dst = append(dst, m.Separator...)
		}
		dst = append(dst, key[f.off:f.end]...)
	}
	if h := chunkField(key, fs); h >= 0 {
		for i, f := range fs {
			if i == h || (i == h+2 && isDecimal(key[f.off:f.end])) {
				continue
			}
			add(f)
		}
		return dst
	}
	for _, f := range fs[:len(fs)-1] {
		if v := key[f.off:f.end]; len(v) >= 16 && isHash(v) {
			continue
		}
		add(f)
	}
	return dst
}

// stem is key without a sibling suffix (when what is left is not empty).
func (m KeyMap) stem(key []byte) []byte {
	for _, s := range m.Siblings {
		if stem, ok := bytes.CutSuffix(key, []byte(s)); ok && len(stem) > 0 {
			return stem
		}
	}
	return key
}

// splitFields appends the fields of key between separators to dst.
func splitFields(dst []keyField, key, sep []byte) []keyField {
	off := 0
	for len(dst) < cap(dst)-1 {
		i := bytes.Index(key[off:], sep)
		if i < 0 {
			break
		}
		dst = append(dst, keyField{off, off + i})
		off += i + len(sep)
	}
	return append(dst, keyField{off, len(key)})
}

// chunkField is the position of an LMCache chunk hash among fs: the first
// hash field after two decimal fields that follow at least one other
// field; -1 when there is none.
func chunkField(key []byte, fs []keyField) int {
	for i := 3; i < len(fs); i++ {
		a, b, h := fs[i-2], fs[i-1], fs[i]
		if isDecimal(key[a.off:a.end]) && isDecimal(key[b.off:b.end]) && isHash(key[h.off:h.end]) {
			return i
		}
	}
	return -1
}

// isDecimal reports whether v is 1 to 9 decimal digits (a world size, a
// worker or layer id).
func isDecimal(v []byte) bool {
	if len(v) == 0 || len(v) > 9 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isHash reports whether v is hex digits, maybe after a '-' (Python's
// f"{h:x}" of a negative hash).
func isHash(v []byte) bool {
	v = bytes.TrimPrefix(v, []byte("-"))
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// placeSlot is the slot that places key in Redis Cluster mode
// (Key.PlaceSlot): its hash tag's, else for a sibling key the slot of its
// stem with the first sibling suffix, else its own.
func (m KeyMap) placeSlot(key []byte) uint16 {
	if _, ok := HashTag(key); ok || len(m.Siblings) == 0 {
		return Slot(key)
	}
	stem := m.stem(key)
	if len(stem) == len(key) {
		return Slot(key)
	}
	first := m.Siblings[0]
	if bytes.HasSuffix(key, []byte(first)) {
		return Slot(key) // it is the first sibling itself
	}
	var buf [256]byte
	return Slot(append(append(buf[:0], stem...), first...))
}

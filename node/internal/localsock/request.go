package localsock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// request is one decoded request: its type and its fields, each still raw
// JSON pointing into the request's frame (nothing is copied: a request is
// handled before the next frame is read into the buffer), so every field is
// checked for the type it must have and ids are parsed as exact unsigned
// integers (never through float64). Keys that are decimal indices ("0",
// "1", ...: the C++ client's get_buffers ids) are kept apart, in arrival
// order, as offsets into body.
type request struct {
	typ  string
	f    map[string]json.RawMessage
	body []byte
	idx  []indexed
}

// indexed is the value of an index key: body[off:end] is the value of key i.
type indexed struct{ i, off, end uint32 }

// parseRequest decodes a request body in one pass of scan.go's scanner. It
// must be a JSON object with a string "type", at most maxFields named
// fields, at most MaxIDsPerRequest index keys, and no longer than its type
// allows (maxRequestBytes). It allocates the field map and the index list,
// nothing in proportion to the values.
func parseRequest(body []byte) (request, error) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return request{}, invalid("the request is not a JSON object")
	}
	r := request{f: make(map[string]json.RawMessage, 8), body: body}
	if n := countIndexKeys(body, i); n > 0 {
		r.idx = make([]indexed, 0, min(n, MaxIDsPerRequest))
	}
	if err := r.scanFields(i); err != nil {
		return request{}, invalid("the request is not valid JSON: %v", err)
	}
	typ, ok, err := r.str("type")
	if err != nil {
		return request{}, err
	}
	if !ok || typ == "" {
		return request{}, invalid(`the request has no "type"`)
	}
	r.typ = typ
	if limit := maxRequestBytes(typ); len(body) > limit {
		return request{}, invalid("%s: the request is %d bytes, over the limit of %d bytes for this type (docs/vineyard.md, \"Limits\")",
			typ, len(body), limit)
	}
	return r, nil
}

// scanFields reads the object at r.body[i] into r.f and r.idx.
func (r *request) scanFields(i int) error {
	b := r.body
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return r.checkEnd(i + 1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return syntaxError(i, "an object key must be a string")
		}
		ks := i
		kend, escaped, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[ks+1 : kend-1]
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return syntaxError(i, `":" expected after an object key`)
		}
		vs := skipSpace(b, i+1)
		ve, err := skipValue(b, vs, 0)
		if err != nil {
			return err
		}
		if n, ok := indexKey(key, MaxIDsPerRequest); ok && !escaped {
			if len(r.idx) >= MaxIDsPerRequest {
				return fmt.Errorf("more than %d index keys", MaxIDsPerRequest)
			}
			r.idx = append(r.idx, indexed{i: uint32(n), off: uint32(vs), end: uint32(ve)})
		} else {
			name := string(key)
			if escaped {
				if err := json.Unmarshal(b[ks:kend], &name); err != nil {
					return syntaxError(kend, "an invalid key")
				}
			}
			if _, dup := r.f[name]; !dup && len(r.f) >= maxFields {
				return fmt.Errorf("more than %d named fields", maxFields)
			}
			r.f[name] = b[vs:ve:ve]
		}
		i = skipSpace(b, ve)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return r.checkEnd(i + 1)
		default:
			return syntaxError(i, `"," or "}" expected`)
		}
	}
}

// countIndexKeys counts the index keys of the object at body[i] (stopping
// at the first syntax error: scanFields reports it), so that scanFields
// allocates their list once.
func countIndexKeys(b []byte, i int) int {
	n := 0
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		kend, escaped, err := skipString(b, i)
		if err != nil {
			return n
		}
		if _, ok := indexKey(b[i+1:kend-1], MaxIDsPerRequest); ok && !escaped {
			n++
		}
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return n
		}
		ve, err := skipValue(b, skipSpace(b, i+1), 0)
		if err != nil {
			return n
		}
		i = skipSpace(b, ve)
		if i >= len(b) || b[i] != ',' {
			return n
		}
		i = skipSpace(b, i+1)
	}
	return n
}

// checkEnd allows only space after the object.
func (r *request) checkEnd(i int) error {
	if i = skipSpace(r.body, i); i != len(r.body) {
		return syntaxError(i, "data after the request's object")
	}
	return nil
}

// indexedU64s returns the unsigned integers under keys "0".."num-1", each
// required (the C++ client's get_buffers ids).
func (r request) indexedU64s(num uint64) ([]uint64, error) {
	if num > uint64(len(r.idx)) {
		return nil, invalid("%s: num is %d but the request has fewer ids", r.typ, num)
	}
	out := make([]uint64, num)
	seen := make([]bool, num)
	for _, e := range r.idx {
		if uint64(e.i) >= num {
			continue
		}
		raw := r.body[e.off:e.end]
		v, ok := parseU64(raw)
		if !ok {
			return nil, invalid("%s: field %q must be an unsigned 64-bit integer, got %s", r.typ, strconv.Itoa(int(e.i)), clip(raw))
		}
		out[e.i], seen[e.i] = v, true
	}
	for i, ok := range seen {
		if !ok {
			return nil, invalid("%s: field %q is required", r.typ, strconv.Itoa(i))
		}
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// has reports whether the field is present and not null.
func (r request) has(name string) bool {
	raw, ok := r.f[name]
	return ok && !isNull(raw)
}

// parseU64 parses an exact unsigned integer: digits only, no sign, fraction
// or exponent, and no string.
func parseU64(raw json.RawMessage) (uint64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || len(raw) > 20 || (raw[0] == '0' && len(raw) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// u64 returns a required unsigned integer field.
func (r request) u64(name string) (uint64, error) {
	v, ok, err := r.optU64(name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, invalid("%s: field %q is required", r.typ, name)
	}
	return v, nil
}

// optU64 returns an optional unsigned integer field.
func (r request) optU64(name string) (uint64, bool, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	v, ok := parseU64(raw)
	if !ok {
		return 0, false, invalid("%s: field %q must be an unsigned 64-bit integer, got %s", r.typ, name, clip(raw))
	}
	return v, true, nil
}

// u64s returns an optional array of unsigned integers, of at most
// MaxIDsPerRequest. It reads the array twice, in place (to check and count
// the items, then to parse them into a slice of exactly their number), so
// it allocates 8 bytes per item and nothing else.
func (r request) u64s(name string) ([]uint64, bool, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return nil, false, nil
	}
	if raw[0] != '[' {
		return nil, false, invalid("%s: field %q must be an array of unsigned 64-bit integers, got %s", r.typ, name, clip(raw))
	}
	n := 0
	err := eachItem(raw, func(k int, it []byte) error {
		if _, ok := parseU64(it); !ok {
			return invalid("%s: %s[%d] must be an unsigned 64-bit integer, got %s", r.typ, name, k, clip(it))
		}
		if n++; n > MaxIDsPerRequest {
			return invalid("%s: %s has more than %d items (docs/vineyard.md, \"Limits\")", r.typ, name, MaxIDsPerRequest)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	out := make([]uint64, 0, n)
	eachItem(raw, func(_ int, it []byte) error {
		v, _ := parseU64(it)
		out = append(out, v)
		return nil
	})
	return out, true, nil
}

// eachItem calls f with the index and the bytes of each item of the JSON
// array arr (already checked by the scanner), stopping at f's first error.
func eachItem(arr []byte, f func(k int, item []byte) error) error {
	i := skipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for k := 0; ; k++ {
		end, err := skipValue(arr, i, 1)
		if err != nil {
			return invalid("%v", err)
		}
		if err := f(k, arr[i:end]); err != nil {
			return err
		}
		i = skipSpace(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return nil
		}
		i = skipSpace(arr, i+1)
	}
}

// str returns an optional string field.
func (r request) str(name string) (string, bool, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, invalid("field %q must be a string, got %s", name, clip(raw))
	}
	return s, true, nil
}

// strs returns an optional array of strings.
func (r request) strs(name string) ([]string, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var s []string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, invalid("%s: field %q must be an array of strings, got %s", r.typ, name, clip(raw))
	}
	return s, nil
}

// boolean returns an optional boolean field (default false).
func (r request) boolean(name string) (bool, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, invalid("%s: field %q must be true or false, got %s", r.typ, name, clip(raw))
	}
	return b, nil
}

// object returns an optional JSON object field, decoded with numbers kept
// exact (json.Number).
func (r request) object(name string) (map[string]any, bool, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return nil, false, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, false, invalid("%s: field %q must be a JSON object, got %s", r.typ, name, clip(raw))
	}
	return m, true, nil
}

// clip shortens raw JSON for an error message (copying at most 40 bytes
// of it).
func clip(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// Vineyard's error codes, as its clients know them.
const (
	codeInvalid         = 1
	codeKeyError        = 2
	codeNotImplemented  = 6
	codeAssertionFailed = 7
	codeUserInputError  = 8
	codeObjectExists    = 11
	codeObjectNotExists = 12
	codeObjectSealed    = 13
	codeObjectNotSealed = 14
	codeObjectIsBlob    = 15
	codeNotEnoughMemory = 41
	codeUnknownError    = 255
)

// replyError is an error reply: {"code": N, "message": "..."}.
type replyError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *replyError) Error() string { return fmt.Sprintf("code %d: %s", e.Code, e.Message) }

func errorf(code int, format string, args ...any) *replyError {
	return &replyError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *replyError { return errorf(codeInvalid, format, args...) }

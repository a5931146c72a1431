package localsock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// request is one decoded request: its type and its fields, each still raw
// JSON, so every field is checked for the type it must have and ids are
// parsed as exact unsigned integers (never through float64).
type request struct {
	typ string
	f   map[string]json.RawMessage
}

// parseRequest decodes a request body. It must be a JSON object with a
// string "type".
func parseRequest(body []byte) (request, error) {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return request{}, invalid("the request is not a JSON object")
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return request{}, invalid("the request is not valid JSON: %v", err)
	}
	r := request{f: f}
	typ, ok, err := r.str("type")
	if err != nil {
		return request{}, err
	}
	if !ok || typ == "" {
		return request{}, invalid(`the request has no "type"`)
	}
	r.typ = typ
	return r, nil
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
	s := string(bytes.TrimSpace(raw))
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
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

// u64s returns an optional array of unsigned integers.
func (r request) u64s(name string) ([]uint64, bool, error) {
	raw, ok := r.f[name]
	if !ok || isNull(raw) {
		return nil, false, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false, invalid("%s: field %q must be an array of unsigned 64-bit integers, got %s", r.typ, name, clip(raw))
	}
	out := make([]uint64, len(items))
	for i, it := range items {
		v, ok := parseU64(it)
		if !ok {
			return nil, false, invalid("%s: %s[%d] must be an unsigned 64-bit integer, got %s", r.typ, name, i, clip(it))
		}
		out[i] = v
	}
	return out, true, nil
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

// clip shortens raw JSON for an error message.
func clip(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
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

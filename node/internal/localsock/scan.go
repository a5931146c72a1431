package localsock

import (
	"errors"
	"fmt"
)

// A small JSON scanner: it finds where each value of a request ends and
// checks its syntax without building anything, so a request is decoded in
// one pass over the frame and each field keeps pointing into it. (Decoding a
// 32 MiB get_buffers_request through map[string]json.RawMessage and one
// json.RawMessage per id took 1.4 GiB and 38 s of CPU.)

// maxDepth bounds the nesting of a request's values (metadata trees are a
// few levels deep).
const maxDepth = 256

var errSyntax = errors.New("invalid JSON")

// syntaxError names the byte offset of a syntax error.
func syntaxError(off int, what string) error {
	return fmt.Errorf("%w at byte %d: %s", errSyntax, off, what)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the offset of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that starts at b[i] (no
// leading space), checking its syntax.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, syntaxError(i, "a value is missing")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := skipString(b, i)
		return end, err
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return 0, syntaxError(i, fmt.Sprintf("nested deeper than %d", maxDepth))
		}
		return skipContainer(b, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return 0, syntaxError(i, fmt.Sprintf("unexpected %q", b[i]))
}

// skipContainer returns the end of the object or array at b[i].
func skipContainer(b []byte, i, depth int) (int, error) {
	obj := b[i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1, nil
	}
	for {
		var err error
		if obj {
			if i >= len(b) || b[i] != '"' {
				return 0, syntaxError(i, "an object key must be a string")
			}
			if i, _, err = skipString(b, i); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, syntaxError(i, `":" expected after an object key`)
			}
			i = skipSpace(b, i+1)
		}
		if i, err = skipValue(b, i, depth); err != nil {
			return 0, err
		}
		i = skipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == closer:
			return i + 1, nil
		default:
			return 0, syntaxError(i, fmt.Sprintf(`"," or %q expected`, closer))
		}
	}
}

// skipString returns the end of the string at b[i] (after its closing
// quote) and whether it has escapes.
func skipString(b []byte, i int) (end int, escaped bool, err error) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			if j+1 >= len(b) {
				return 0, false, syntaxError(j, "unterminated escape")
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+5 >= len(b) || !isHex4(b[j+2:j+6]) {
					return 0, false, syntaxError(j, `\u needs four hex digits`)
				}
				j += 5
			default:
				return 0, false, syntaxError(j, fmt.Sprintf("invalid escape %q", b[j+1]))
			}
		case c < 0x20:
			return 0, false, syntaxError(j, "a control character in a string")
		}
	}
	return 0, false, syntaxError(len(b), "unterminated string")
}

func isHex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// skipNumber returns the end of the number at b[i] (JSON's grammar).
func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return 0, syntaxError(start, "a number needs digits")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, syntaxError(start, "a fraction needs digits")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, syntaxError(start, "an exponent needs digits")
		}
	}
	return i, nil
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, syntaxError(i, "invalid literal")
	}
	return i + len(lit), nil
}

// indexKey reports whether key is a decimal index ("0", "17"; no sign, no
// leading zero) below limit, and its value.
func indexKey(key []byte, limit int) (int, bool) {
	if len(key) == 0 || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range key {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < limit
}

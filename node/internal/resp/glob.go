package resp

// globMatch reports whether s matches pattern as Redis's MATCH and KEYS
// patterns do: * any run of bytes (including none, and '/'), ? one byte,
// [abc] [^abc] [a-z] a set, \x the byte x. Bytes are compared exactly.
func globMatch(pattern, s []byte) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 1 && pattern[1] == '*' {
				pattern = pattern[1:]
			}
			if len(pattern) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			ok, rest := matchSet(pattern[1:], s[0])
			if !ok {
				return false
			}
			pattern, s = rest, s[1:]
		default:
			if pattern[0] == '\\' && len(pattern) > 1 {
				pattern = pattern[1:]
			}
			if len(s) == 0 || pattern[0] != s[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return len(s) == 0
}

// matchSet matches c against the set that starts p (after its '[') and
// returns the pattern after the set's ']'. An unterminated set runs to the
// end of the pattern, as in Redis.
func matchSet(p []byte, c byte) (bool, []byte) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	match := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) > 1:
			match = match || p[1] == c
			p = p[2:]
		case len(p) > 2 && p[1] == '-' && p[2] != ']':
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (c >= lo && c <= hi)
			p = p[3:]
		default:
			match = match || p[0] == c
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:] // the ']'
	}
	return match != not, p
}

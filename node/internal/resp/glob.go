package resp

// globMatch reports whether s matches pattern as Redis's MATCH and KEYS
// patterns do: * any run of bytes (including none, and '/'), ? one byte,
// [abc] [^abc] [a-z] a set, \x the byte x. Bytes are compared exactly. It
// backtracks only to the last '*' (time at most len(pattern)·len(s), never
// exponential: a pattern is a client's input).
func globMatch(pattern, s []byte) bool {
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			if pattern[p] == '*' {
				starP, starI = p, i
				p++
				continue
			}
			if n, ok := matchOne(pattern[p:], s[i]); ok {
				p, i = p+n, i+1
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starI++ // the last '*' takes one byte more
		p, i = starP+1, starI
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches byte c against the pattern element that starts p (not
// '*') and returns how many pattern bytes the element takes.
func matchOne(p []byte, c byte) (int, bool) {
	switch {
	case p[0] == '?':
		return 1, true
	case p[0] == '[':
		ok, rest := matchSet(p[1:], c)
		return len(p) - len(rest), ok
	case p[0] == '\\' && len(p) > 1:
		return 2, p[1] == c
	}
	return 1, p[0] == c
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

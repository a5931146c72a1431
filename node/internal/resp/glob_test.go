package resp

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestGlobMatchesAsRedisDoes checks MATCH patterns against Redis's
// stringmatchlen behaviour.
func TestGlobMatchesAsRedisDoes(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "a/b@c", true}, {"h?llo", "hello", true}, {"h?llo", "hllo", false},
		{"h*llo", "heeeello", true}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true},
		{"h[a-b]llo", "hcllo", false}, {`h\*llo`, "h*llo", true}, {`h\*llo`, "hello", false},
		{"vllm@*kv_bytes", "vllm@meta-llama/Llama-3.1-8B@1@0@abckv_bytes", true},
		{"vllm@*metadata", "vllm@m@1@0@abckv_bytes", false}, {"a*b*c", "aXbYc", true}, {"a*b*c", "aXbY", false},
		{"[", "a", false}, {"ab", "abc", false},
	} {
		if got := globMatch([]byte(tc.pattern), []byte(tc.s)); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestGlobMatchIsNotExponential: a pattern of many stars that fails on a
// long key answers at once (a backtracking matcher takes minutes).
func TestGlobMatchIsNotExponential(t *testing.T) {
	key := bytes.Repeat([]byte{'a'}, 300)
	pattern := []byte(strings.Repeat("*a", 20) + "*b")
	done := make(chan bool, 1)
	go func() { done <- globMatch(pattern, key) }()
	select {
	case m := <-done:
		if m {
			t.Fatal("matched a key without a b")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("globMatch took over 10s on a pathological pattern")
	}
}

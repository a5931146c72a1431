package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestEveryServeFlagIsDocumentedWithItsDefault: docs/configuration.md's table
// has a row for every flag of kvring serve, naming its environment variable,
// and the row's default is the flag's (durations compared as durations,
// lists without brackets). A flag whose default is empty, zero or worked out
// from other flags (its default column then says so in words) needs only
// the row.
func TestEveryServeFlagIsDocumentedWithItsDefault(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ env, def string }
	rows := map[string]row{}
	code := regexp.MustCompile("`([^`]*)`")
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		flags, envs := code.FindAllStringSubmatch(cells[1], -1), code.FindAllStringSubmatch(cells[2], -1)
		for i, f := range flags {
			r := row{def: strings.TrimSpace(cells[3])}
			if i < len(envs) {
				r.env = envs[i][1]
			}
			rows[strings.TrimPrefix(f[1], "--")] = r
		}
	}
	serve := subcommand(t, newRootCmd(), "serve")
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		r, ok := rows[f.Name]
		if !ok {
			t.Errorf("--%s has no row in docs/configuration.md", f.Name)
			return
		}
		if r.env != envName(f.Name) {
			t.Errorf("--%s: the row names the variable %q, want %q", f.Name, r.env, envName(f.Name))
		}
		switch f.DefValue {
		case "", "0", "[]", "0s":
			return // none, or worked out from other flags: the row says how in words
		}
		m := code.FindStringSubmatch(r.def)
		if m == nil {
			t.Errorf("--%s: the row's default %q names no value; the flag's is %q", f.Name, r.def, f.DefValue)
			return
		}
		if !sameDefault(f, m[1]) {
			t.Errorf("--%s: the row's default is %q, the flag's %q", f.Name, m[1], f.DefValue)
		}
	})
}

// sameDefault reports whether doc, as the docs write it, is f's default.
func sameDefault(f *pflag.Flag, doc string) bool {
	switch f.Value.Type() {
	case "duration":
		d1, err1 := time.ParseDuration(doc)
		d2, err2 := time.ParseDuration(f.DefValue)
		return err1 == nil && err2 == nil && d1 == d2
	case "stringSlice":
		return doc == strings.Trim(f.DefValue, "[]")
	}
	return doc == f.DefValue
}

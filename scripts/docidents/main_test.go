package main

import (
	"slices"
	"strings"
	"testing"
)

// TestItReportsExactlyTheNamesTheCodeLacks: on a fixture module, every
// backticked name the code declares passes, every one it lacks is reported
// with its file and line, and commands, flags, files, metric names and
// fenced code are not taken for identifiers.
func TestItReportsExactlyTheNamesTheCodeLacks(t *testing.T) {
	missing, err := run("testdata/mod")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range missing {
		file, rest, _ := strings.Cut(m, ":")
		_, rest, _ = strings.Cut(rest, ": `")
		name, _, _ := strings.Cut(rest, "`")
		got = append(got, file+" "+name)
	}
	want := []string{
		"docs/page.md pkg.Acquire", "docs/page.md View.Verify", "docs/page.md resolveBusy",
		"docs/page.md SpreadThreshold", "docs/page.md Spread.Window", "docs/page.md errors.Nope", "docs/page.md Join",
		"pkg/doc.go Thing.Acquire",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIdentifierTellsNamesFromOtherCode: what counts as a Go identifier.
func TestIdentifierTellsNamesFromOtherCode(t *testing.T) {
	for span, want := range map[string]string{
		"store.Stage": "store.Stage", "*store.Store": "store.Store", "ChunkIDs()": "ChunkIDs",
		"Close(ctx)": "Close", "writeOwners": "writeOwners", "ErrNotFound": "ErrNotFound",
		"put.go": "", "catalog.db": "", "--memory-limit": "", "kvring_put_total": "", "EXISTS": "", "lru": "",
		"kvring serve": "", "/dev/shm": "", "KVRING_ADDR=x": "", "kvring.v1": "",
	} {
		got, ok := identifier(span)
		if ok != (want != "") || got != want {
			t.Errorf("identifier(%q) = %q, %v; want %q", span, got, ok, want)
		}
	}
}

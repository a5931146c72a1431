package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/node"
)

// TestVersionPrintsTheBuild: kvring version, kvring --version and
// kvring version --json say the same build; a test binary carries no
// commit, and they say so instead of naming one.
func TestVersionPrintsTheBuild(t *testing.T) {
	t.Parallel()
	want := buildInfo()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := runInProcess(t, args...)
		if err != nil || out != want.String()+"\n" {
			t.Fatalf("kvring %v = %q, %v; want %q", args, out, err, want.String())
		}
		if want.Commit == "" && !strings.Contains(out, "+devel, unknown commit") {
			t.Fatalf("kvring %v in a build without a commit = %q, want it to say so", args, out)
		}
	}
	out, _, err := runInProcess(t, "version", "--json")
	var got buildinfo.Info
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Version != want.Version || got.Commit != want.Commit {
		t.Fatalf("kvring version --json = %q, %v; want %+v", out, err, want)
	}
}

// TestMembersShowsEachVersion: the members table has each member's version
// and commit, and says so for a build before versions.
func TestMembersShowsEachVersion(t *testing.T) {
	t.Parallel()
	now := time.Now()
	info := node.ClusterInfo{NodeID: "a", Members: []node.ClusterMember{
		{ID: "a", State: "active", Liveness: "alive", Self: true, BootTime: now, Version: "v0.5.0-dev", Commit: "0123456789ab"},
		{ID: "b", State: "active", Liveness: "alive", BootTime: now, Version: "v0.4.0"},
		{ID: "c", State: "active", Liveness: "alive", BootTime: now},
	}}
	var b bytes.Buffer
	if err := printMembers(&b, info, now); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{"a *": {"v0.5.0-dev", "0123456789ab"}, "b ": {"v0.4.0", "unknown"},
		"c ": {"before v0.4.0", "unknown"}} {
		line := lineWith(b.String(), id)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("row of %s lacks %q:\n%s", id, w, b.String())
			}
		}
	}
	if !strings.Contains(b.String(), "VERSION") || !strings.Contains(b.String(), "COMMIT") {
		t.Errorf("no VERSION and COMMIT columns:\n%s", b.String())
	}
}

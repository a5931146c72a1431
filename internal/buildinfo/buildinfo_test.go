package buildinfo

import (
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

func vcs(rev, at, modified string) *debug.BuildInfo {
	return &debug.BuildInfo{GoVersion: "go1.26.0", Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at},
		{Key: "vcs.modified", Value: modified}}}
}

// TestVersionSaysWhatTheBuildKnows: a clean build of a commit is the
// release; a modified tree says +dirty; a build without a commit (go run,
// go test, -buildvcs=false) says +devel and "unknown commit"; a stamp wins
// over what the toolchain recorded.
func TestVersionSaysWhatTheBuildKnows(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		stamp   Stamp
		version string
		commit  string
		line    string
	}{
		{"clean", vcs(rev, "2026-01-02T03:04:05Z", "false"), Stamp{}, Release, rev,
			"kvring " + Release + ", commit 0123456789ab (2026-01-02T03:04:05Z), go1.26.0"},
		{"modified", vcs(rev, "2026-01-02T03:04:05Z", "true"), Stamp{}, Release + "+dirty", rev,
			"kvring " + Release + "+dirty, commit 0123456789ab (2026-01-02T03:04:05Z), modified, go1.26.0"},
		{"go run", &debug.BuildInfo{GoVersion: "go1.26.0"}, Stamp{}, Release + "+devel", "",
			"kvring " + Release + "+devel, unknown commit (a go run, go test or -buildvcs=false build), go1.26.0"},
		{"no build info", nil, Stamp{}, Release + "+devel", "",
			"kvring " + Release + "+devel, unknown commit (a go run, go test or -buildvcs=false build)"},
		{"stamped", &debug.BuildInfo{GoVersion: "go1.26.0"},
			Stamp{Version: "v9.8.7", Commit: rev, CommitTime: "2026-01-02T03:04:05Z", Modified: "false"}, "v9.8.7", rev,
			"kvring v9.8.7, commit 0123456789ab (2026-01-02T03:04:05Z), go1.26.0"},
		{"commit stamped in a worktree", &debug.BuildInfo{GoVersion: "go1.26.0"},
			Stamp{Commit: rev, CommitTime: "2026-01-02T03:04:05Z", Modified: "true"}, Release + "+dirty", rev,
			"kvring " + Release + "+dirty, commit 0123456789ab (2026-01-02T03:04:05Z), modified, go1.26.0"},
	} {
		info := FromBuildInfo(tc.bi, tc.stamp)
		if info.Version != tc.version || info.Commit != tc.commit {
			t.Errorf("%s: version %q commit %q, want %q %q", tc.name, info.Version, info.Commit, tc.version, tc.commit)
		}
		if tc.commit != "" && !info.CommitTime.Equal(at) {
			t.Errorf("%s: commit time %v, want %v", tc.name, info.CommitTime, at)
		}
		if got := info.String(); got != tc.line {
			t.Errorf("%s: String() = %q\nwant          %q", tc.name, got, tc.line)
		}
	}
	if got := (Info{}).ShortCommit(); got != "unknown" {
		t.Errorf("ShortCommit of an unknown build = %q", got)
	}
}

// TestReadInATestBinary: go test stamps no commit unless the toolchain
// found one, and the version then says so.
func TestReadInATestBinary(t *testing.T) {
	t.Parallel()
	info := Read(Stamp{})
	if info.Commit == "" && !strings.HasSuffix(info.Version, "+devel") {
		t.Fatalf("a build without a commit has version %q, want a +devel suffix", info.Version)
	}
	if !strings.HasPrefix(info.Version, Release) {
		t.Fatalf("version %q does not start with Release %q", info.Version, Release)
	}
}

// TestReleaseFollowsRecord: every line of RELEASES is a version and a full
// commit, the versions rise, and Release is past the last of them (the tree
// after a release is the next version's -dev), so a build between releases
// never claims to be one.
func TestReleaseFollowsRecord(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../RELEASES")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !releaseRE.MatchString(f[0]) || !commitRE.MatchString(f[1]) {
			t.Fatalf("RELEASES line %q is not `vX.Y.Z <40 hex digits>`", line)
		}
		if last != "" && !older(last, f[0]) {
			t.Fatalf("RELEASES: %s follows %s", f[0], last)
		}
		last = f[0]
	}
	if last != "" && !older(last, strings.TrimSuffix(Release, "-dev")) {
		t.Fatalf("Release %q is not past the last recorded release %s: a build of the tree would claim to be it", Release, last)
	}
}

var (
	releaseRE = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	commitRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// older reports whether version a (vX.Y.Z) comes before b.
func older(a, b string) bool {
	pa, pb := strings.Split(a[1:], "."), strings.Split(b[1:], ".")
	for i := range min(len(pa), len(pb)) {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

// Package buildinfo says which build of kvring is running: its version, the
// commit it was built from, when that commit was made and whether the tree
// had uncommitted changes. It reads what the Go toolchain stamps into the
// binary (runtime/debug.ReadBuildInfo) and keeps no state: the command reads
// it once and hands the Info to the node.
package buildinfo

import (
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Release is the version of this tree when a build is not given one with
// -ldflags: the release the tree is, or, with a "-dev" suffix, the release
// it leads to. RELEASES, at the root of the repository, records the commit
// of each release; TestReleaseFollowsRecord keeps the two in step (Release
// is past every recorded release). Making a release: set Release to it,
// commit, then record that commit in RELEASES and set Release to the next
// version's -dev in the following commit.
const Release = "v0.5.0-dev"

// Info describes one build. The zero Info is an unknown build.
type Info struct {
	// Version is the build's version: the one set with
	// -ldflags "-X main.version=…" when there is one, else Release, with
	// "+dirty" when the tree had uncommitted changes and "+devel" when the
	// build carries no commit (go run, go test, -buildvcs=false): such a
	// build may hold any change on top of Release.
	Version string `json:"version"`
	// Commit is the full hex commit the build was made from ("" unknown).
	Commit string `json:"commit,omitempty"`
	// CommitTime is when that commit was made (zero: unknown). It is the
	// commit's time, not the build's: the same commit gives the same binary.
	CommitTime time.Time `json:"commit_time,omitzero"`
	// Modified: the tree had uncommitted changes when it was built.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"go_version,omitempty"`
}

// Stamp is what a build was given with -ldflags -X (the command's
// variables; "" when not given). The Go toolchain stamps the commit itself
// (vcs.revision) when it builds in a git checkout, but not in a git worktree
// (its .git is a file) nor with -buildvcs=false: make build and the upgrade
// test pass the commit here instead.
type Stamp struct {
	Version    string // e.g. "v0.4.0"
	Commit     string // full hex commit
	CommitTime string // RFC 3339
	Modified   string // "true" or "false"
}

// Read returns this binary's Info: what stamp says, else what the toolchain
// stamped. It does not block and does no I/O.
func Read(stamp Stamp) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return FromBuildInfo(bi, stamp)
}

// FromBuildInfo is Read over a given debug.BuildInfo (nil: none).
func FromBuildInfo(bi *debug.BuildInfo, stamp Stamp) Info {
	var info Info
	if bi != nil {
		info.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.CommitTime, _ = time.Parse(time.RFC3339, s.Value)
			case "vcs.modified":
				info.Modified, _ = strconv.ParseBool(s.Value)
			}
		}
	}
	if stamp.Commit != "" {
		info.Commit = stamp.Commit
		info.CommitTime, _ = time.Parse(time.RFC3339, stamp.CommitTime)
		info.Modified, _ = strconv.ParseBool(stamp.Modified)
	}
	switch {
	case stamp.Version != "":
		info.Version = stamp.Version
	case info.Commit == "":
		info.Version = Release + "+devel"
	case info.Modified:
		info.Version = Release + "+dirty"
	default:
		info.Version = Release
	}
	return info
}

// ShortCommit is the commit's first 12 hex digits, or "unknown".
func (i Info) ShortCommit() string {
	switch {
	case i.Commit == "":
		return "unknown"
	case len(i.Commit) > 12:
		return i.Commit[:12]
	}
	return i.Commit
}

// String is one line for people: "kvring v0.4.0, commit 0123456789ab
// (2026-01-02T03:04:05Z), go1.26.0", with "modified" when the tree was, and
// "unknown commit (a go run, go test or -buildvcs=false build)" when the
// build carries none.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("kvring " + i.versionOrUnknown())
	if i.Commit == "" {
		b.WriteString(", unknown commit (a go run, go test or -buildvcs=false build)")
	} else {
		b.WriteString(", commit " + i.ShortCommit())
		if !i.CommitTime.IsZero() {
			b.WriteString(" (" + i.CommitTime.UTC().Format(time.RFC3339) + ")")
		}
		if i.Modified {
			b.WriteString(", modified")
		}
	}
	if i.GoVersion != "" {
		b.WriteString(", " + i.GoVersion)
	}
	return b.String()
}

func (i Info) versionOrUnknown() string {
	if i.Version == "" {
		return "unknown version"
	}
	return i.Version
}

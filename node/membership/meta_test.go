package membership

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/ring"
)

func sampleNodeMeta() nodeMeta {
	return nodeMeta{
		NodeID:      "3f2b8c1e-6a4d-4e8f-9b0a-1c2d3e4f5a6b",
		GRPCAddr:    "10.1.2.3:9600",
		AdminAddr:   "10.1.2.3:9602",
		State:       Active,
		BootTime:    time.UnixMilli(1_760_000_000_123),
		Fingerprint: ring.DefaultConfig().Fingerprint(),
		RESPAddr:    "10.1.2.3:9603",
		Moves:       &sampleMoves,
	}
}

var sampleMoves = moves.FromPartitions(99, []int{5, 6, 7, 4000})

func TestMembershipMetaRoundTrip(t *testing.T) {
	t.Parallel()
	m := sampleNodeMeta()
	b, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 135 {
		t.Errorf("typical meta is %d bytes, want about 100", len(b))
	}
	got, err := decodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if !nodeMetaEqual(got, m) {
		t.Fatalf("round trip: got %+v, want %+v", got, m)
	}
}

func TestMembershipMetaLimitMatchesMemberlist(t *testing.T) {
	t.Parallel()
	if metaMaxSize != memberlist.MetaMaxSize {
		t.Fatalf("metaMaxSize = %d, memberlist.MetaMaxSize = %d", metaMaxSize, memberlist.MetaMaxSize)
	}
}

func TestMembershipMetaSizeLimit(t *testing.T) {
	t.Parallel()
	m := sampleNodeMeta()
	m.Moves = nil                          // a summary is cut to the room left (TestMembershipMetaCarriesTheHandOffSummary)
	m.AdminAddr = strings.Repeat("x", 200) // past 127 bytes, so its length prefix keeps its size below
	base, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	// Grow the admin address until the encoding is exactly the limit, then one byte more.
	m.AdminAddr += strings.Repeat("x", metaMaxSize-len(base))
	b, err := m.encode()
	if err != nil {
		t.Fatalf("meta of exactly %d bytes: %v", metaMaxSize, err)
	}
	if len(b) != metaMaxSize {
		t.Fatalf("encoded %d bytes, want %d", len(b), metaMaxSize)
	}
	if _, err := decodeMeta(b); err != nil {
		t.Fatalf("decode at the limit: %v", err)
	}
	m.AdminAddr += "x"
	if _, err := m.encode(); !errors.Is(err, errMetaTooLarge) {
		t.Fatalf("meta over the limit: err = %v, want errMetaTooLarge", err)
	}
	if _, err := decodeMeta(append(b, 0)); !errors.Is(err, errMetaInvalid) {
		t.Fatalf("decode over the limit: err = %v, want errMetaInvalid", err)
	}
}

func TestMembershipMetaRejectsUnknownVersion(t *testing.T) {
	t.Parallel()
	b, err := sampleNodeMeta().encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []byte{0, 2, 255} {
		b[0] = v
		_, err := decodeMeta(b)
		if !errors.Is(err, errMetaVersion) {
			t.Fatalf("version %d: err = %v, want errMetaVersion", v, err)
		}
		if !strings.Contains(err.Error(), "reads version 1") {
			t.Errorf("version %d: error %q does not say which version this node reads", v, err)
		}
	}
}

func TestMembershipMetaCarriesHandingOff(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		m := sampleNodeMeta()
		m.HandingOff = on
		b, err := m.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeMeta(b)
		if err != nil || got.HandingOff != on {
			t.Fatalf("handing off %v: decoded %+v, %v", on, got, err)
		}
	}
}

func TestMembershipMetaRejectsMalformed(t *testing.T) {
	t.Parallel()
	sample := sampleNodeMeta()
	sample.Moves = nil // the last field: a prefix that ends before it is an earlier release's
	good, err := sample.encode()
	if err != nil {
		t.Fatal(err)
	}
	// Every strict prefix is truncated, except the ones that end where an
	// earlier release's metadata ended: before the flags byte, and before
	// the Redis-protocol address.
	resp := 1 + len(sampleNodeMeta().RESPAddr) // its length byte and bytes
	noFlags, noRESP := len(good)-resp-1, len(good)-resp
	for n := range len(good) {
		if n == noFlags || n == noRESP {
			continue
		}
		if _, err := decodeMeta(good[:n]); err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", n)
		}
	}
	for _, n := range []int{noFlags, noRESP} {
		if m, err := decodeMeta(good[:n]); err != nil || m.HandingOff || m.RESPAddr != "" {
			t.Fatalf("metadata of %d bytes: %+v, %v; want decoded, not handing off, no RESP address", n, m, err)
		}
	}
	bad := bytes.Clone(good)
	bad[1] = 9 // unknown state
	if _, err := decodeMeta(bad); !errors.Is(err, errMetaInvalid) {
		t.Fatalf("unknown state: err = %v", err)
	}
	bad = bytes.Clone(good)
	bad[10] = 0xff // node id length runs past the end
	if _, err := decodeMeta(bad); !errors.Is(err, errMetaInvalid) {
		t.Fatalf("long length: err = %v", err)
	}
	empty := sampleNodeMeta()
	empty.NodeID = ""
	if _, err := empty.encode(); !errors.Is(err, errMetaInvalid) {
		t.Fatalf("encode without node id: err = %v", err)
	}
}

func TestMembershipMetaIgnoresAppendedFields(t *testing.T) {
	t.Parallel()
	sample := sampleNodeMeta()
	v := RehearsalVersions()
	sample.Build, sample.Settings, sample.Versions = Build{Version: "v0.4.0"}, "0123456789abcdef", &v
	b, err := sample.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMeta(append(b, 3, 'n', 'e', 'w'))
	if err != nil {
		t.Fatalf("decode with a field appended by a later revision: %v", err)
	}
	if !nodeMetaEqual(got, sample) {
		t.Fatalf("got %+v", got)
	}
}

// TestMembershipMetaFromEarlierReleasesHasNoRESPAddr decodes metadata that
// ends after the flags (a release before the Redis-protocol port) and that
// ends before them.
func TestMembershipMetaFromEarlierReleasesHasNoRESPAddr(t *testing.T) {
	t.Parallel()
	m := sampleNodeMeta()
	m.RESPAddr, m.HandingOff, m.Moves = "", true, nil
	b, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMeta(b[:len(b)-1]) // no RESP field
	if err != nil || !nodeMetaEqual(got, m) {
		t.Fatalf("without the RESP field: %+v, %v", got, err)
	}
	m.HandingOff = false
	got, err = decodeMeta(b[:len(b)-2]) // no flags either
	if err != nil || !nodeMetaEqual(got, m) {
		t.Fatalf("without flags: %+v, %v", got, err)
	}
}

func TestMembershipMetaRandomRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	str := func(max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	}
	for i := range 5000 {
		m := nodeMeta{
			NodeID:      str(200),
			GRPCAddr:    str(200),
			AdminAddr:   str(200),
			State:       State(rng.IntN(6)),
			BootTime:    time.UnixMilli(rng.Int64N(1<<50) - 1<<49),
			Fingerprint: str(40),
			RESPAddr:    str(60),
			Build:       Build{Version: str(metaMaxBuild), Commit: str(12)},
		}
		if rng.IntN(2) == 0 {
			m.Build = Build{} // an earlier release's layout
		} else if rng.IntN(2) == 0 {
			v := Versions{Placement: Range{rng.IntN(5), rng.IntN(5)}, Wire: Range{rng.IntN(5), rng.IntN(5)}}
			m.Settings, m.Versions = str(16), &v
		}
		want := m
		if m.Build != (Build{}) || m.Versions != nil {
			unknown := moves.Unknown() // a build is gossiped after a summary: "may hold any partition"
			want.Moves = &unknown
		}
		b, err := m.encode()
		if err != nil {
			if m.NodeID == "" || !m.State.valid() || errors.Is(err, errMetaTooLarge) {
				continue
			}
			t.Fatalf("case %d: encode: %v", i, err)
		}
		if len(b) > metaMaxSize {
			t.Fatalf("case %d: encoded %d bytes", i, len(b))
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		if !nodeMetaEqual(got, want) {
			t.Fatalf("case %d: got %+v, want %+v", i, got, want)
		}
		// Flipping random bytes never panics.
		b[rng.IntN(len(b))] ^= byte(1 + rng.UintN(255))
		_, _ = decodeMeta(b)
	}
}

// FuzzMembershipMetaDecode checks that decoding arbitrary bytes never panics, and that whatever decodes
// re-encodes to something that decodes to the same metadata.
func FuzzMembershipMetaDecode(f *testing.F) {
	good, err := sampleNodeMeta().encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		again, err := m.encode()
		if err != nil {
			t.Fatalf("decoded meta does not re-encode: %v", err)
		}
		m2, err := decodeMeta(again)
		if err != nil || !nodeMetaEqual(m, m2) {
			t.Fatalf("re-encoded meta: %+v, %v; want %+v", m2, err, m)
		}
	})
}

func nodeMetaEqual(a, b nodeMeta) bool {
	return a.NodeID == b.NodeID && a.GRPCAddr == b.GRPCAddr && a.AdminAddr == b.AdminAddr &&
		a.State == b.State && a.BootTime.UnixMilli() == b.BootTime.UnixMilli() && a.Fingerprint == b.Fingerprint &&
		a.HandingOff == b.HandingOff && a.RESPAddr == b.RESPAddr && sameMoves(a.Moves, b.Moves) && a.Build == b.Build &&
		a.Settings == b.Settings && (a.Versions == nil) == (b.Versions == nil) && (a.Versions == nil || *a.Versions == *b.Versions)
}

// TestMembershipMetaCarriesTheBuild: the version and commit round-trip
// after a summary of any size (it leaves them room), each cut to its cap;
// metadata that ends after the summary (a release before v0.4.0) has no
// build, and shows as "before v0.4.0".
func TestMembershipMetaCarriesTheBuild(t *testing.T) {
	t.Parallel()
	var parts []int
	for p := 0; p < 65000; p += 50 {
		parts = append(parts, p)
	}
	big := moves.FromPartitions(7, parts)
	for _, sum := range []*moves.Summary{nil, &big} {
		m := sampleNodeMeta()
		m.Moves = sum
		m.Build = Build{Version: "v0.4.0" + strings.Repeat("+x", 40), Commit: "0123456789abcdef0123"}
		b, err := m.encode()
		if err != nil || len(b) > metaMaxSize {
			t.Fatalf("encode: %d bytes, %v", len(b), err)
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Build{Version: m.Build.Version[:metaMaxBuild], Commit: "0123456789ab"}); got.Build != want {
			t.Fatalf("build %+v, want %+v", got.Build, want)
		}
		if got.Moves == nil || (sum != nil && got.Moves.Ring != 7) || (sum == nil && !got.Moves.All) {
			t.Fatalf("summary %+v beside the build (sent %+v)", got.Moves, sum)
		}
		// A release before v0.4.0 ends after the summary.
		tail := len(appendString(appendString(nil, got.Build.Version), got.Build.Commit))
		old, err := decodeMeta(b[:len(b)-tail])
		if err != nil || old.Build != (Build{}) || old.Build.String() != "before v0.4.0" {
			t.Fatalf("metadata before v0.4.0: %+v (%s), %v", old.Build, old.Build, err)
		}
	}
}

// TestMembershipMetaCarriesTheHandOffSummary: the summary round-trips; one
// too large for the room left is cut (merged ranges naming every partition
// it named) so that the whole stays within memberlist's limit; metadata from
// a release before summaries decodes without one.
func TestMembershipMetaCarriesTheHandOffSummary(t *testing.T) {
	t.Parallel()
	m := sampleNodeMeta()
	var parts []int
	for p := 0; p < 65000; p += 50 {
		parts = append(parts, p)
	}
	big := moves.FromPartitions(7, parts)
	m.Moves = &big
	b, err := m.encode()
	if err != nil || len(b) > metaMaxSize {
		t.Fatalf("encode: %d bytes, %v", len(b), err)
	}
	got, err := decodeMeta(b)
	if err != nil || got.Moves == nil || got.Moves.Ring != 7 {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for _, p := range parts {
		if !got.Moves.Contains(p) {
			t.Fatalf("partition %d lost in the cut summary", p)
		}
	}
	m.Moves = nil
	b, err = m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeMeta(b); err != nil || got.Moves != nil {
		t.Fatalf("without a summary: %+v, %v", got.Moves, err)
	}
}

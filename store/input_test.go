package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Bad input: every refusal is a typed error naming the problem, and the store
// keeps working afterwards.

func TestEmptyChunkIsInvalid(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	for _, size := range []int64{0, -1} {
		_, err := s.Stage("ns", testID(1), size, 0)
		wantErr(t, err, ErrInvalid, "size must be positive")
	}
	wantErr(t, s.put("ns", testID(1), nil, 0), ErrInvalid, "size must be positive")
	stillWorks(t, s)
}

func TestOversizedChunkIsInvalid(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	cfg.MaxChunkSize = 1 << 20
	s := openTest(t, cfg)
	_, err := s.Stage("ns", testID(1), 1<<20+1, 0)
	wantErr(t, err, ErrInvalid, "larger than the maximum 1048576")
	if _, err := s.Stage("ns", testID(2), 1<<20, 0); err != nil {
		t.Fatalf("a chunk of exactly MaxChunkSize: %v", err)
	}
	if s.MaxChunkSize() != 1<<20 || s.Limit() != 16<<20 {
		t.Fatalf("MaxChunkSize %d, Limit %d", s.MaxChunkSize(), s.Limit())
	}
}

func TestMalformedNamespaceIsInvalid(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 100)
	cases := []struct{ ns, says string }{
		{"", "namespace is empty"},
		{strings.Repeat("n", MaxNamespaceLen+1), "longer than 128"},
		{"has space", "has character ' ' at 3"},
		{"nul\x00", "has character"},
		{"ünicode", "has character"},
		{"semi;colon", "has character ';'"},
	}
	for _, tc := range cases {
		wantErr(t, ValidateNamespace(tc.ns), ErrInvalid, tc.says)
		_, err := s.Stage(tc.ns, c.id, int64(c.size), Checksum(c.data))
		wantErr(t, err, ErrInvalid, tc.says)
		wantErr(t, s.put(tc.ns, c.id, c.data, Checksum(c.data)), ErrInvalid, tc.says)
		_, err = s.Get(tc.ns, c.id)
		wantErr(t, err, ErrInvalid, tc.says)
		_, _, err = s.lookup(tc.ns, []ID{c.id}, time.Second)
		wantErr(t, err, ErrInvalid, tc.says)
		wantErr(t, s.evict(tc.ns, c.id), ErrInvalid, tc.says)
		if s.Contains(tc.ns, c.id) {
			t.Fatalf("Contains(%q) is true", tc.ns)
		}
	}
	for _, ok := range []string{"a", strings.Repeat("n", MaxNamespaceLen), "llama-3/70b:fp8=v1+x_y.z"} {
		if err := ValidateNamespace(ok); err != nil {
			t.Fatalf("ValidateNamespace(%q): %v", ok, err)
		}
		mustPut(t, s, ok, c.id, c.data)
		readBack(t, s, ok, c.id, c.data)
		if err := s.evict(ok, c.id); err != nil {
			t.Fatal(err)
		}
	}
	stillWorks(t, s)
}

func TestParseIDAcceptsExactlyIDSizeBytes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, IDSize - 1, IDSize + 1, 64} {
		_, err := ParseID(make([]byte, n))
		wantErr(t, err, ErrInvalid, "must be 32 bytes")
	}
	want := testID(7)
	got, err := ParseID(want[:])
	if err != nil || got != want {
		t.Fatalf("ParseID round trip: %v, %v", got, err)
	}
	got, err = ParseHexID(want.String())
	if err != nil || got != want {
		t.Fatalf("ParseHexID round trip: %v, %v", got, err)
	}
	_, err = ParseHexID("zz" + want.String()[2:])
	wantErr(t, err, ErrInvalid, "not hex")
	_, err = ParseHexID(want.String()[:62])
	wantErr(t, err, ErrInvalid, "must be 32 bytes, got 31")
}

func TestSealWithoutStageReportsNotStaged(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	var zero Staged
	wantErr(t, zero.Seal(), ErrNotStaged)
	_, err := zero.Write([]byte("x"))
	wantErr(t, err, ErrNotStaged)
	zero.Abort()
	var nilStaged *Staged
	wantErr(t, nilStaged.Seal(), ErrNotStaged)

	c := newSpec(1, 1000)
	w := stageWrite(t, s, "ns", c, c.size, 1000)
	w.Abort()
	wantErr(t, w.Seal(), ErrNotStaged, c.id.String())
	_, err = w.Write(c.data[:1])
	wantErr(t, err, ErrNotStaged)
	if s.Contains("ns", c.id) {
		t.Fatal("aborted chunk held")
	}
	stillWorks(t, s)
}

func TestWritePastSizeIsInvalidAndLeavesTheWriteUsable(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 1000)
	w := stageWrite(t, s, "ns", c, 600, 600)
	_, err := w.Write(make([]byte, 401))
	wantErr(t, err, ErrInvalid, "past the chunk's size 1000")
	// The refused write copied nothing: the rest of the chunk still fits.
	if _, err := w.Write(c.data[600:]); err != nil {
		t.Fatal(err)
	}
	_, err = w.Write([]byte{0})
	wantErr(t, err, ErrInvalid, "past the chunk's size")
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "ns", c.id, c.data)
	stillWorks(t, s, c)
}

func TestChunkLargerThanTheBudgetIsRefusedWithATypedError(t *testing.T) {
	t.Parallel()
	// A MaxChunkSize above the budget cannot be configured.
	cfg := testConfig(t, 1<<20)
	cfg.MaxChunkSize = 1<<20 + 1
	_, err := Open(cfg)
	wantErr(t, err, ErrInvalid, "MaxChunkSize")

	// At the edge, a chunk within MaxChunkSize whose slot would exceed the
	// budget is refused as invalid before it touches the policy.
	cfg = testConfig(t, 1<<20+1)
	cfg.MaxChunkSize = 1<<20 + 1
	s := openTest(t, cfg)
	_, err = s.Stage("ns", testID(1), 1<<20+1, 0)
	wantErr(t, err, ErrInvalid, "more than the memory limit")
	if st := s.Stats(); st.UsedBytes != 0 || st.StagedChunks != 0 {
		t.Fatalf("a refused stage left accounting behind: %+v", st)
	}
	stillWorks(t, s)
}

func TestNegativePinLeaseIsInvalid(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 1000)
	mustPut(t, s, "ns", c.id, c.data)
	_, _, err := s.lookup("ns", []ID{c.id}, -time.Second)
	wantErr(t, err, ErrInvalid, "must not be negative")
	if st := s.Stats(); st.PinnedChunks != 0 {
		t.Fatal("a refused Lookup pinned a chunk")
	}
	if s.Release(12345) {
		t.Fatal("Release of a lease never granted reported true")
	}
	stillWorks(t, s, c)
}

func TestOpenRefusesConfigurationsThatCannotWork(t *testing.T) {
	t.Parallel()
	base := testConfig(t, 16<<20)
	cases := []struct {
		name string
		edit func(*Config)
		says string
	}{
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir is required"},
		{"negative limit", func(c *Config) { c.MemoryLimit = -1 }, "MemoryLimit must be positive"},
		{"chunk above limit", func(c *Config) { c.MaxChunkSize = 32 << 20 }, "MaxChunkSize must not exceed MemoryLimit"},
		{"negative chunk", func(c *Config) { c.MaxChunkSize = -5 }, "MaxChunkSize must be positive"},
		{"negative segment", func(c *Config) { c.SegmentSize = -1 }, "SegmentSize must be positive"},
		{"negative stage lease", func(c *Config) { c.StageLease = -time.Second }, "StageLease must not be negative"},
		{"negative pin lease", func(c *Config) { c.MaxPinLease = -time.Second }, "MaxPinLease must not be negative"},
		{"unknown policy", func(c *Config) { c.Policy = "fifo" }, `Policy: eviction policy must be "lru" or "tinylfu", got "fifo"`},
		{"negative expected", func(c *Config) { c.ExpectedChunkSize = -1 }, "ExpectedChunkSize must be positive"},
	}
	for _, tc := range cases {
		cfg := base
		tc.edit(&cfg)
		_, err := Open(cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("%s: Open = %v, want ErrInvalid saying %q", tc.name, err, tc.says)
		}
	}
	// The refusals left nothing locked: the same directories open fine.
	s := openTest(t, base)
	stillWorks(t, s)
}

func TestValidateFillsDefaultsAndReportsEveryBadSetting(t *testing.T) {
	t.Parallel()
	cfg := Config{DataDir: t.TempDir()}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of a config with only DataDir: %v", err)
	}
	want := DefaultConfig(cfg.DataDir)
	if cfg.ShmDir != want.ShmDir || cfg.MemoryLimit != want.MemoryLimit || cfg.MaxChunkSize != DefaultMaxChunkSize ||
		cfg.SegmentSize != want.SegmentSize || cfg.StageLease != want.StageLease || cfg.MaxPinLease != want.MaxPinLease ||
		cfg.Policy != want.Policy || cfg.ExpectedChunkSize != want.ExpectedChunkSize ||
		cfg.MaintenanceInterval != want.MaintenanceInterval || cfg.Now == nil || cfg.Logger == nil {
		t.Fatalf("Validate filled in %+v, want the defaults %+v", cfg, want)
	}

	// A small budget lowers the default MaxChunkSize to fit it.
	small := Config{DataDir: t.TempDir(), MemoryLimit: 1 << 20}
	if err := small.Validate(); err != nil || small.MaxChunkSize != 1<<20 {
		t.Fatalf("Validate with a 1 MiB budget: MaxChunkSize %d, %v", small.MaxChunkSize, err)
	}

	bad := Config{
		MemoryLimit:       -1,
		MaxChunkSize:      -5,
		SegmentSize:       -1,
		StageLease:        -time.Second,
		MaxPinLease:       -time.Second,
		Policy:            "fifo",
		ExpectedChunkSize: -1,
	}
	err := bad.Validate()
	wantErr(t, err, ErrInvalid, "DataDir is required", "MemoryLimit must be positive", "MaxChunkSize must be positive",
		"SegmentSize must be positive", "StageLease must not be negative", "MaxPinLease must not be negative",
		"eviction policy must be", "ExpectedChunkSize must be positive")
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate returned %T, want the errors joined", err)
	}
	if errs := joined.Unwrap(); len(errs) != 8 {
		t.Fatalf("Validate reported %d errors, want 8: %v", len(errs), err)
	} else {
		for _, e := range errs {
			wantErr(t, e, ErrInvalid)
		}
	}
}

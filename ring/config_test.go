package ring

import (
	"errors"
	"math"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	t.Parallel()
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRejectsOutOfRangeSettings(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*Config){
		"zero partitions":          func(c *Config) { c.PartitionCount = 0 },
		"negative partitions":      func(c *Config) { c.PartitionCount = -5 },
		"too many partitions":      func(c *Config) { c.PartitionCount = MaxPartitionCount + 1 },
		"zero replication":         func(c *Config) { c.ReplicationFactor = 0 },
		"too much replication":     func(c *Config) { c.ReplicationFactor = MaxReplicationFactor + 1 },
		"load 1":                   func(c *Config) { c.Load = 1 },
		"load below 1":             func(c *Config) { c.Load = 0.8 },
		"zero load":                func(c *Config) { c.Load = 0 },
		"NaN load":                 func(c *Config) { c.Load = math.NaN() },
		"infinite load":            func(c *Config) { c.Load = math.Inf(1) },
		"one virtual node":         func(c *Config) { c.VirtualNodes = 1 },
		"negative virtual nodes":   func(c *Config) { c.VirtualNodes = -1 },
		"too many virtual nodes":   func(c *Config) { c.VirtualNodes = MaxVirtualNodes + 1 },
		"unknown hasher":           func(c *Config) { c.Hasher = "md5" },
		"empty hasher":             func(c *Config) { c.Hasher = "" },
		"zero value (no defaults)": func(c *Config) { *c = Config{} },
	} {
		cfg := DefaultConfig()
		mutate(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", name, err)
		}
		if _, err := New(testMembers("n", 3), 1, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New error = %v, want ErrInvalidConfig", name, err)
		}
		if cfg.MaxMembers() != 0 {
			t.Errorf("%s: MaxMembers() = %d for an invalid config", name, cfg.MaxMembers())
		}
	}
}

// TestFingerprintIsStable pins the default fingerprint: nodes of different versions compare it, so it must
// not change unless the settings or the placement algorithm do.
func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	if got, want := DefaultConfig().Fingerprint(), "c43d0c59437ea9df"; got != want {
		t.Fatalf("DefaultConfig().Fingerprint() = %q, want %q", got, want)
	}
	zero := DefaultConfig()
	zero.Placement = 0 // settings from before versions were named
	if zero.Fingerprint() != DefaultConfig().Fingerprint() || zero.PlacementVersion() != PlacementV2 {
		t.Fatalf("placement 0 has fingerprint %s (version %d), want version 2's", zero.Fingerprint(), zero.PlacementVersion())
	}
}

// TestSettingsFingerprintLeavesOutThePlacementVersion: nodes compare the
// operator's settings and agree on a placement version separately, so the
// settings fingerprint is the same at every version while the full one
// differs.
func TestSettingsFingerprintLeavesOutThePlacementVersion(t *testing.T) {
	t.Parallel()
	v2, v3 := DefaultConfig(), DefaultConfig()
	v3.Placement = PlacementV3
	if v2.SettingsFingerprint() != v3.SettingsFingerprint() {
		t.Fatalf("settings fingerprints differ across placement versions: %s, %s", v2.SettingsFingerprint(), v3.SettingsFingerprint())
	}
	if v2.Fingerprint() == v3.Fingerprint() {
		t.Fatalf("placement versions 2 and 3 share the fingerprint %s", v2.Fingerprint())
	}
	for _, bad := range []int{1, 4, -1} {
		c := DefaultConfig()
		c.Placement = bad
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("placement %d: Validate() = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// TestPlacementV3PlacesDifferently: the rehearsal version really moves
// partitions (a switch to it is a ring change the hand-off must carry),
// and keeps the partition of every key.
func TestPlacementV3PlacesDifferently(t *testing.T) {
	t.Parallel()
	members := testMembers("node-", 8)
	v2 := mustNew(t, members, 1, DefaultConfig())
	cfg := DefaultConfig()
	cfg.Placement = PlacementV3
	v3 := mustNew(t, members, 1, cfg)
	moved := Moved(v2, v3)
	if moved < DefaultPartitionCount/2 {
		t.Fatalf("placement 3 moves %d of %d partitions, want most (7/8 expected)", moved, DefaultPartitionCount)
	}
	if v2.Partition("ns", []byte("id")) != v3.Partition("ns", []byte("id")) {
		t.Fatal("placement 3 changed a key's partition")
	}
	t.Logf("placement 2 -> 3 moves %d of %d partitions at 8 members", moved, DefaultPartitionCount)
}

func TestFingerprintCoversEverySetting(t *testing.T) {
	t.Parallel()
	base := DefaultConfig().Fingerprint()
	for name, mutate := range map[string]func(*Config){
		"placement":   func(c *Config) { c.Placement = PlacementV3 },
		"partitions":  func(c *Config) { c.PartitionCount++ },
		"replication": func(c *Config) { c.ReplicationFactor++ },
		"load":        func(c *Config) { c.Load = math.Nextafter(c.Load, 2) },
		"vnodes":      func(c *Config) { c.VirtualNodes++ },
		"hasher":      func(c *Config) { c.Hasher = "other" },
	} {
		cfg := DefaultConfig()
		mutate(&cfg)
		if cfg.Fingerprint() == base {
			t.Errorf("changing %s leaves the fingerprint unchanged", name)
		}
	}
}

func TestMaxMembersIsExact(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.PartitionCount = 13
	cfg.VirtualNodes = 4
	if got := cfg.MaxMembers(); got != 13 {
		t.Fatalf("MaxMembers() = %d, want 13", got)
	}
	if _, err := New(testMembers("n", 13), 1, cfg); err != nil {
		t.Fatalf("13 members on 13 partitions: %v", err)
	}
	if _, err := New(testMembers("n", 14), 1, cfg); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("14 members on 13 partitions: err = %v, want ErrTooManyMembers", err)
	}
}

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
}

func TestFingerprintCoversEverySetting(t *testing.T) {
	t.Parallel()
	base := DefaultConfig().Fingerprint()
	for name, mutate := range map[string]func(*Config){
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

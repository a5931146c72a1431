package membership

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/ring"
)

func TestMembershipConfigValidate(t *testing.T) {
	t.Parallel()
	var zero Config
	zero.NodeID = "n1"
	if err := zero.validate(); err != nil {
		t.Fatalf("zero config with a node id: %v", err)
	}
	if zero.GossipAddr != ":7946" || zero.RejoinInterval != 30*time.Second || zero.Ring != ring.DefaultConfig() ||
		zero.Timing != DefaultGossipTiming() || zero.Logger == nil || zero.BroadcastTimeout != 5*time.Second {
		t.Errorf("defaults not filled: %+v", zero)
	}

	for name, c := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no node id":         {func(c *Config) { c.NodeID = "" }, "node id is required"},
		"host name bind":     {func(c *Config) { c.GossipAddr = "localhost:7946" }, "must be empty or an IP"},
		"no port":            {func(c *Config) { c.GossipAddr = "127.0.0.1" }, "gossip address"},
		"bad advertise":      {func(c *Config) { c.AdvertiseAddr = ":7946" }, "host is required"},
		"empty seed":         {func(c *Config) { c.Join = []string{""} }, "join address"},
		"negative interval":  {func(c *Config) { c.RejoinInterval = -time.Second }, "negative"},
		"ring would panic":   {func(c *Config) { c.Ring.Load = 1 }, "load"},
		"meta over 512":      {func(c *Config) { c.GRPCAddr = strings.Repeat("g", 500) }, "limit 512"},
		"negative gossip ms": {func(c *Config) { c.Timing.ProbeTimeout = -1 }, "timings"},
	} {
		cfg := DefaultConfig()
		cfg.NodeID = "n1"
		c.mutate(&cfg)
		err := cfg.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, c.want)
		}
		if name == "ring would panic" && !errors.Is(err, ring.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ring.ErrInvalidConfig", name, err)
		}
		if name == "meta over 512" && !errors.Is(err, errMetaTooLarge) {
			t.Errorf("%s: err = %v, want errMetaTooLarge", name, err)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted a config without node id")
	}
}

func TestMembershipAdvertiseAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		gossip, advertise string
		wantIP            string
		wantPort          uint16
	}{
		{"127.0.0.1:7946", "", "127.0.0.1", 0},
		{"10.1.2.3:7946", "", "10.1.2.3", 0},
		{":7946", "192.0.2.7:9000", "192.0.2.7", 9000},
		{":7946", "192.0.2.7:", "192.0.2.7", 0},
		{":7946", "[2001:db8::1]:7000", "2001:db8::1", 7000},
	} {
		cfg := LocalConfig("n1")
		cfg.GossipAddr, cfg.AdvertiseAddr = c.gossip, c.advertise
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		bind, _ := parseBindAddr(cfg.GossipAddr)
		ip, port, err := cfg.advertiseIP(t.Context(), bind)
		if err != nil || ip.String() != c.wantIP || port != c.wantPort {
			t.Errorf("gossip %q advertise %q: got %v:%d (%v), want %s:%d", c.gossip, c.advertise, ip, port, err, c.wantIP, c.wantPort)
		}
	}
	// An unspecified bind address advertises a real address of this machine, or 127.0.0.1 if it has none.
	cfg := DefaultConfig()
	cfg.NodeID = "n1"
	bind, err := parseBindAddr(cfg.GossipAddr)
	if err != nil {
		t.Fatal(err)
	}
	ip, _, err := cfg.advertiseIP(t.Context(), bind)
	if err != nil || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || (ip.IsLoopback() && ip != netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("unspecified bind advertises %v (%v)", ip, err)
	}
}

package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/kvring/kvring/store"
)

// Config configures a Node. DefaultConfig returns the documented defaults.
type Config struct {
	// AdminAddr is the HTTP listen address for /healthz, /readyz and /v1/*.
	// Default ":9602". Port 0 picks a free port (see Node.AdminAddr).
	AdminAddr string
	// Store configures the local tier; see store.Config for its defaults.
	// Store.DataDir defaults to "./kvring-data".
	Store store.Config
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		AdminAddr: ":9602",
		Store:     store.DefaultConfig("./kvring-data"),
		Logger:    slog.Default(),
	}
}

func (c *Config) validate() error {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Store.Logger == nil {
		c.Store.Logger = c.Logger.With("component", "store")
	}
	var errs []error
	if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		errs = append(errs, fmt.Errorf("admin address %q: %w", c.AdminAddr, err))
	}
	if c.Store.DataDir == "" {
		errs = append(errs, errors.New("data directory is required"))
	}
	if c.Store.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("memory limit must not be negative, got %d", c.Store.MemoryLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid node configuration: %w", err)
	}
	return nil
}

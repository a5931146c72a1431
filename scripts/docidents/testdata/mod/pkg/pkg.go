package pkg

import "errors"

// Config configures a Thing.
type Config struct {
	Spread SpreadConfig
}

// SpreadConfig is a nested config.
type SpreadConfig struct{ Threshold int }

// Thing does things.
type Thing struct{}

// Get gets.
func (t *Thing) Get() error { return errors.New("x") }

func helperFunc() {}

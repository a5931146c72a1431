// Package pkg is a fixture: `Thing.Get` exists, `Thing.Acquire` does not.
package pkg

// Package choice chooses among candidates by load, for the reads of a spread
// group (node/internal/spread, client/spread.go). It keeps no state.
package choice

import "math/rand/v2"

// TwoChoices returns the index, among n >= 1 candidates, of the less loaded
// of two drawn at random (power of two choices); load(i) is candidate i's
// load, unknown counting as 0.
func TwoChoices(n int, load func(i int) uint32) int {
	if n == 1 {
		return 0
	}
	a := rand.IntN(n)
	b := (a + 1 + rand.IntN(n-1)) % n
	if load(b) < load(a) {
		return b
	}
	return a
}

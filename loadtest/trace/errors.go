package trace

import (
	"errors"
	"fmt"
)

// Sentinel errors for malformed trace lines; they are wrapped in a *LineError.
var (
	// ErrMissingField: a required field (timestamp, input_length, output_length,
	// hash_ids) is absent or null.
	ErrMissingField = errors.New("trace: missing field")
	// ErrNegative: a timestamp or length is negative.
	ErrNegative = errors.New("trace: negative value")
	// ErrHashCount: len(hash_ids) != ceil(input_length / BlockTokens).
	ErrHashCount = errors.New("trace: hash_ids count does not match input_length")
)

// LineError reports a malformed line. Line counts from 1 and includes blank lines.
// Err is one of the sentinels above or the JSON decoding error.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

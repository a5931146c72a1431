package trace

import "time"

// BlockTokens is the number of tokens one hash id covers in a Mooncake trace.
const BlockTokens = 512

// Request is one line of a trace.
//
// A Request returned by this package owns its HashIDs slice; the caller may keep or
// modify it.
type Request struct {
	// Timestamp is the arrival time relative to the start of the trace.
	Timestamp time.Duration
	// InputLength and OutputLength are prompt and completion lengths in tokens.
	InputLength  int
	OutputLength int
	// HashIDs names the input blocks in prefix order; len(HashIDs) equals
	// BlocksFor(InputLength).
	HashIDs []int64
}

// BlocksFor returns the number of blocks that cover inputLength tokens:
// ceil(inputLength / BlockTokens), and 0 for inputLength <= 0.
func BlocksFor(inputLength int) int {
	if inputLength <= 0 {
		return 0
	}
	return (inputLength + BlockTokens - 1) / BlockTokens
}

// BlockTokenCount returns the number of tokens in block i of r: BlockTokens for every
// full block, the remainder for the last one, and 0 when i is out of range.
func (r Request) BlockTokenCount(i int) int {
	if i < 0 || i >= BlocksFor(r.InputLength) {
		return 0
	}
	return min(BlockTokens, r.InputLength-i*BlockTokens)
}

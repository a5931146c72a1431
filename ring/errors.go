package ring

import "errors"

// Sentinel errors. Functions wrap them with context ("cannot build ring: ...: %w"); test for them with errors.Is.
var (
	// ErrNoMembers reports that a ring has no members, so nothing can own a chunk.
	ErrNoMembers = errors.New("ring: no members")
	// ErrInvalidConfig reports a Config setting that is out of range.
	ErrInvalidConfig = errors.New("ring: invalid config")
	// ErrInvalidMember reports a member that cannot be placed: an empty or duplicate ID.
	ErrInvalidMember = errors.New("ring: invalid member")
	// ErrTooManyMembers reports more members than partitions (see Config.MaxMembers).
	ErrTooManyMembers = errors.New("ring: too many members for the partition count")
	// ErrHashCollision reports two virtual nodes that hash to the same point; renaming a member resolves it.
	ErrHashCollision = errors.New("ring: virtual node hash collision")
	// ErrPlacement reports that placement failed in a way validation should have prevented (a bug).
	ErrPlacement = errors.New("ring: placement failed")
)

package handoff

import "time"

// Status is what the Mover has done, for the admin API and the metrics.
type Status struct {
	Running bool  `json:"running"` // a pass is in progress
	Passes  int64 `json:"passes"`
	// Totals since the node started.
	CopiedChunks  int64 `json:"copied_chunks"`
	CopiedBytes   int64 `json:"copied_bytes"`
	EvictedChunks int64 `json:"evicted_chunks"` // handed off, then removed here
	FailedCopies  int64 `json:"failed_copies"`
	// Last is the last pass that ran to its end.
	Last PassStats `json:"last_pass"`
}

// PassStats describes one pass.
type PassStats struct {
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Epoch   uint64    `json:"ring_epoch"`
	// Held is how many chunks this node held when the pass began.
	Held int `json:"held"`
	// Misplaced: held here, but this node is none of their owners (a join
	// moved them, this node drains, or they were written here in place of
	// an unreachable owner).
	Misplaced    int   `json:"misplaced"`
	Copied       int   `json:"copied"`
	CopiedBytes  int64 `json:"copied_bytes"`
	Evicted      int   `json:"evicted"`
	FailedCopies int   `json:"failed_copies"`
	// Pending: misplaced chunks still here at the end (an owner could not be
	// reached, or refused them). A pass stopped before it planned (its
	// context ended) does not know which are misplaced: every held chunk.
	Pending int `json:"pending"`
	// Underreplicated: chunks this node owns that fewer owners than their
	// namespace's replication factor hold.
	Underreplicated int `json:"underreplicated"`
	// NoOwner: misplaced chunks with no member to go to (every member
	// drains); counted in Pending too.
	NoOwner int `json:"no_owner"`
	// Unreachable: members the pass could not ask.
	Unreachable []string `json:"unreachable,omitempty"`
	// UnknownPlacement: chunks of namespaces placed by groups stored without
	// their group key (by an earlier release): never moved.
	UnknownPlacement int `json:"unknown_placement"`
	// SpreadKept: chunks held here as spread copies of hot groups (package
	// spread), left in place while their group is spread.
	SpreadKept int `json:"spread_kept"`
	// Errors holds the first few copy errors.
	Errors []string `json:"errors,omitempty"`
}

// add adds what o moved: copies, evictions and copy errors.
func (s *PassStats) add(o PassStats) {
	s.Copied += o.Copied
	s.CopiedBytes += o.CopiedBytes
	s.FailedCopies += o.FailedCopies
	s.Evicted += o.Evicted
	for _, e := range o.Errors {
		if len(s.Errors) < maxErrors {
			s.Errors = append(s.Errors, e)
		}
	}
}

// merge adds a batch's statistics: what it moved, and what settling
// counted.
func (s *PassStats) merge(o PassStats) {
	s.add(o)
	s.Pending += o.Pending
	s.NoOwner += o.NoOwner
	s.Underreplicated += o.Underreplicated
}

// undone reports whether the pass left work to try again soon.
func (s PassStats) undone() bool {
	return s.Pending > 0 || s.FailedCopies > 0 || len(s.Unreachable) > 0
}

// maxErrors is how many copy errors a pass keeps.
const maxErrors = 8

func (s *PassStats) noteError(err error) {
	if len(s.Errors) < maxErrors {
		s.Errors = append(s.Errors, err.Error())
	}
}

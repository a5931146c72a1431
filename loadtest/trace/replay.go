package trace

// Policy is a cache simulator driven one block access at a time. Access reports
// whether id was held and updates the policy's state (admission, eviction).
type Policy interface {
	Access(id int64) (hit bool)
}

// Replay feeds every block id of reqs to p, in arrival order and prefix order within
// a request, and returns the number of hits and of accesses.
func Replay(reqs []Request, p Policy) (hits, total int) {
	for _, r := range reqs {
		for _, id := range r.HashIDs {
			if p.Access(id) {
				hits++
			}
		}
		total += len(r.HashIDs)
	}
	return hits, total
}

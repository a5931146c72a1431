// Package spread keeps a popular prompt's first groups from melting the
// node that owns them: it finds hot placement groups and copies them to
// more members, so lookups and gets of those groups can be answered by any
// of them.
//
// # How
//
//   - Counter (counter.go): every owner counts, per group key, the lookups
//     (Has calls) that reach it in a window, and remembers a sample of the
//     ids they asked about. A key asked Threshold times in one window is
//     hot.
//   - Spreader (spreader.go): one goroutine, owned by the node and waited
//     for on Close. For a hot key whose primary owner this node is, it copies
//     the sampled chunks it holds to the other members of the key's spread
//     set (ring.SpreadSet: its owners, then members picked by keys derived
//     from it; Width members in all), with the same two-phase write as a
//     put, marked as spread copies. A key still hot in
//     a later window is copied again: what was new is sent, what the members
//     hold answers already_held, and their keeping time starts over. Once
//     spread to w members the primary sees about one lookup in w, so its
//     Counter finds the group hot at Threshold/w.
//   - Table (table.go): what this node knows of spread groups. A Hold record
//     says this node keeps spread copies of a group until a time (its
//     hand-off neither moves nor evicts them before then; its eviction
//     policy may). A Hint record says a holder reported the group spread
//     (coordinators send the group's lookups and gets to any of its spread
//     members, and fall back to the owners for what a member lacks).
//
// Only namespaces placed by groups are spread: with one chunk per key, a
// prompt's chunks are already scattered over the ring and access skew is
// near its floor (docs/placement.md).
//
// # Contract
//
// Spreading never changes what counts as held: a spread copy is an ordinary
// sealed chunk on its member, written with the two-phase write, checked by
// its checksum on every read. Owners keep their copies whatever happens to
// the spread ones, so a lookup or get that misses on a spread member asks
// the owners. Records end with their time: after a restart, or once a group
// cools down, the hand-off finds the copies misplaced and evicts them after
// confirming that the owners hold them.
//
// It must not decide placement (the ring does), hold chunk bytes beyond the
// views of one copy batch, or block the callers of Counter and Table (both
// take one mutex for a map operation).
package spread

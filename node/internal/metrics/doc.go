// Package metrics holds the Prometheus instruments a node updates as it
// serves: one Set per node, shared by the coordinator (package coord) and the
// owner (package owner), registered by the node.
//
// It owns instruments only: no goroutines, no I/O, no registration (the node
// registers Collectors with the registerer it was given). Metrics read at
// scrape time from the store or the member table are not here: the node's
// collectors read them.
package metrics

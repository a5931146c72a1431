package placement

// Result holds one scheme replayed over one workload on one cluster. "Lookup calls" are the RPCs a client
// would send: without early stop, one to every node that is asked for at least one group of the prompt
// (the distinct owners asked); with early stop, one per node per wave (a node asked in two waves counts twice).
type Result struct {
	Workload string
	Scheme   string
	Nodes    int
	Requests int
	// DistinctChunks is the number of distinct chunks in the workload (each stored at least once).
	DistinctChunks int

	// AskedMean and AskedP99 are the mean and 99th percentile (nearest rank) of lookup calls per request.
	AskedMean, AskedP99 float64
	// RoundTripsMean is the mean number of waves per lookup (1 without early stop).
	RoundTripsMean float64

	// AccessSkew is max/mean over all nodes of lookup calls received (one unit per request per node asked).
	AccessSkew float64
	// AccessFloor is the AccessSkew the same per-request call counts give when each request asks that many
	// distinct nodes drawn uniformly at random (seeded): the sampling-noise floor for this trace and N. A
	// scheme cannot be expected to beat it.
	AccessFloor float64
	// ReadSkew is max/mean over nodes of chunk reads: each held chunk of a request's prefix is one read at
	// the node asked for its group.
	ReadSkew float64

	// StoredSkew is max/mean over nodes of chunk copies held at the end of the replay (each distinct chunk is
	// stored once per owner of its group: one owner, or Replicas for spread groups).
	StoredSkew float64
	// StoredFloor is the StoredSkew the same groups give when each is stored on as many distinct nodes drawn
	// uniformly at random (seeded): the floor set by the number and sizes of the groups, whatever the ring.
	StoredFloor float64
	// PartitionSkew is max/mean over nodes of the partitions each node is primary for: the ring's own
	// imbalance, which every scheme inherits.
	PartitionSkew float64
	// ExtraStored is copies / distinct chunks − 1: the storage a spreading scheme adds.
	ExtraStored float64

	// Moved is the mean over joiners of (copies the joined ring holds on a node that did not hold them
	// before) / (copies on the base ring): the fraction of stored data that moves when one node joins. For a
	// single-owner scheme it is the fraction of distinct chunks whose owner changes.
	Moved float64
	// MovedRatio is Moved / (1/(N+1)), the ideal share of one joiner; MovedMaxRatio the worst joiner's.
	MovedRatio, MovedMaxRatio float64
	// PartitionMovedRatio is the mean over joiners of (partitions whose primary changed / partitions) /
	// (1/(N+1)): what the ring itself moves, the expectation Moved approaches with many small keys.
	PartitionMovedRatio float64
	// Joins is the number of joiners Moved averages over.
	Joins int
}

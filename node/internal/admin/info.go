package admin

import (
	"encoding/hex"
	"slices"
	"time"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/internal/nsschema"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// This file holds the read-only views of a running node that the admin API
// serves and the kvring CLI decodes: plain values with JSON names, built on
// each call. None of them waits for the node's lifecycle lock, so they answer
// while Close drains requests.

// ClusterInfo is this node's view of the cluster (GET /v1/cluster).
type ClusterInfo struct {
	// NodeID is the node that answered.
	NodeID string `json:"node_id"`
	// Epoch is the epoch of the answering node's ring; epochs are local to a
	// node (compare members, not epochs, across nodes).
	Epoch uint64 `json:"epoch"`
	// Build is the answering node's version, commit and commit time (as GET
	// /v1/version).
	Build buildinfo.Info `json:"build"`
	// Active are the versions the answering node uses: for each part, the
	// highest version every member supports.
	Active membership.ActiveVersions `json:"active_versions"`
	// Members are sorted by ID: alive members and members that died or left
	// in the last 10 minutes.
	Members []ClusterMember `json:"members"`
}

// ClusterMember is one member as the answering node last heard of it.
type ClusterMember struct {
	ID string `json:"id"`
	// State is the member's own state: joining, active, draining or leaving.
	State string `json:"state"`
	// Liveness is gossip's view: alive, dead or left.
	Liveness string `json:"liveness"`
	// RingMember says whether the member owns partitions in the answering
	// node's ring.
	RingMember bool `json:"ring_member"`
	// Forgotten: an operator removed the member from the answering node's
	// ring (kvring forget); it owns nothing there until it joins again.
	Forgotten  bool      `json:"forgotten"`
	Self       bool      `json:"self"`
	GRPCAddr   string    `json:"grpc_addr"`
	AdminAddr  string    `json:"admin_addr"`
	GossipAddr string    `json:"gossip_addr"`
	BootTime   time.Time `json:"boot_time"`
	// Since is when the answering node last saw the member join, change or
	// leave.
	Since time.Time `json:"since"`
	// Version and Commit are the member's build, as it gossips them
	// (Commit: 12 hex digits, "" unknown). A member of a build before
	// v0.4.0 gossips neither: Version is "".
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Versions are the versions of each versioned part (placement, wire)
	// the member supports.
	Versions membership.Versions `json:"versions"`
}

// RingInfo describes the answering node's ring (GET /v1/ring).
type RingInfo struct {
	NodeID            string  `json:"node_id"`
	Epoch             uint64  `json:"epoch"`
	PartitionCount    int     `json:"partition_count"`
	ReplicationFactor int     `json:"replication_factor"` // the most owners a namespace may ask for
	LoadFactor        float64 `json:"load_factor"`
	// MaxLoad is the load bound: the most partitions one member may be
	// primary for (0 with no members).
	MaxLoad     int    `json:"max_load"`
	Fingerprint string `json:"fingerprint"` // of the ring settings and placement version; equal on every node of a settled cluster
	// Placement is the placement algorithm's version the ring was built
	// with: the highest every member supports.
	Placement int `json:"placement_version"`
	// Unsettled: the ring changed, or this node started, less than the
	// settle window (--settle-window) ago, so this node's lookups and gets
	// also ask members that do not own a chunk.
	Unsettled bool `json:"unsettled"`
	// Members are sorted by ID; their Partitions sum to PartitionCount.
	Members []RingMember `json:"members"`
}

// RingMember is one ring member and its share of the partitions.
type RingMember struct {
	ID       string `json:"id"`
	GRPCAddr string `json:"grpc_addr"`
	// Partitions is how many partitions the member is primary for.
	Partitions int `json:"partitions"`
}

// NamespaceInfo is a registered namespace (GET /v1/namespaces).
type NamespaceInfo struct {
	Name   string          `json:"name"`
	Schema NamespaceSchema `json:"schema"`
	// Fingerprint is the hex SHA-256 of the schema; the admin API shows it
	// only to callers with the admin token (omitted otherwise).
	Fingerprint       string    `json:"fingerprint,omitempty"`
	ReplicationFactor uint32    `json:"replication_factor"`
	MinReplicas       uint32    `json:"min_replicas"`
	Created           time.Time `json:"created"`
	CreatedBy         string    `json:"created_by"`
	// Chunks and Bytes are what this node holds of the namespace (Chunks:
	// in shared memory or on disk, each once; Bytes: the memory its chunks
	// take, slots included). DiskChunks and DiskBytes (payload) are what its
	// disk tier holds of it, chunks also in memory included.
	Chunks     int64 `json:"chunks"`
	Bytes      int64 `json:"bytes"`
	DiskChunks int64 `json:"disk_chunks,omitempty"`
	DiskBytes  int64 `json:"disk_bytes,omitempty"`
	// Share is the namespace's share of this node's memory (zero: none;
	// see docs/reliability.md), GuaranteeBytes and CapBytes the same in
	// bytes of this node's --memory-limit (0: none).
	Share          store.Share `json:"share"`
	GuaranteeBytes int64       `json:"guarantee_bytes"`
	CapBytes       int64       `json:"cap_bytes"`
	// Evictions counts the namespace's chunks this node's eviction policy
	// removed; Hits and Misses the chunk ids of it lookups here found held
	// in memory, or not (since the node started).
	Evictions uint64 `json:"evictions"`
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
}

// NamespaceSchema is a namespace's KV layout, as its first client registered
// it: the SDK's schema type (client.Schema).
type NamespaceSchema = nsschema.Schema

// Readiness is whether the node serves engines, and why not (GET /readyz).
type Readiness struct {
	Ready  bool   `json:"ready"`
	Status string `json:"status"` // "ready" or "not ready"
	// StoreOpen: the local store is open. Joined: gossip runs and this node
	// is a member of its own ring. Serving: start-up finished and shutdown
	// has not begun (false from the moment Close is called).
	StoreOpen bool `json:"store_open"`
	Joined    bool `json:"joined"`
	Serving   bool `json:"serving"`
	// StoreHealthy: the store keeps its promises (store.Store.Health is
	// nil): its catalog can be written and no segment file was lost under
	// it. StoreError says what is wrong when it is false.
	StoreHealthy bool   `json:"store_healthy"`
	StoreError   string `json:"store_error,omitempty"`
	// Draining: an operator asked the node to drain (it takes no new
	// chunks, so load balancers should send engines elsewhere).
	Draining bool `json:"draining"`
	// DiskError says why the disk tier stopped offloading (a full disk,
	// an I/O error, its directory gone); "" while it works or is off. The
	// node stays ready: shared memory serves, and the disk tier serves
	// what it holds.
	DiskError string `json:"disk_error,omitempty"`
	// Accepting: every listener (gRPC, admin, local socket, Redis) can accept
	// connections; false while one cannot for want of descriptors
	// (EMFILE, ENFILE), which AcceptError names.
	Accepting   bool   `json:"accepting"`
	AcceptError string `json:"accept_error,omitempty"`
}

// Cluster returns this node's view of the cluster. It does not block.
func (a *API) Cluster() ClusterInfo {
	r := a.member.Ring()
	owns := make(map[string]bool, r.Len())
	for _, m := range r.Members() {
		owns[m.ID] = true
	}
	self := a.st.NodeID()
	info := ClusterInfo{NodeID: self, Epoch: r.Epoch(), Build: a.build, Active: a.member.Active(), Members: []ClusterMember{}}
	for _, m := range a.member.Members() {
		info.Members = append(info.Members, ClusterMember{
			ID: m.ID, State: m.State.String(), Liveness: m.Liveness.String(), RingMember: owns[m.ID], Forgotten: m.Forgotten, Self: m.ID == self,
			GRPCAddr: m.GRPCAddr, AdminAddr: m.AdminAddr, GossipAddr: m.GossipAddr, BootTime: m.BootTime, Since: m.Since,
			Version: m.Build.Version, Commit: m.Build.Commit, Versions: m.Versions,
		})
	}
	return info
}

// RingInfo returns the current ring's settings and load. It does not
// block.
func (a *API) RingInfo() RingInfo {
	r := a.member.Ring()
	cfg := r.Config()
	info := RingInfo{
		NodeID: a.st.NodeID(), Epoch: r.Epoch(), PartitionCount: cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor, LoadFactor: cfg.Load, MaxLoad: r.MaxLoad(),
		Fingerprint: cfg.Fingerprint(), Placement: cfg.PlacementVersion(), Unsettled: a.member.Unsettled(), Members: []RingMember{},
	}
	load := r.LoadDistribution()
	for _, m := range r.Members() {
		info.Members = append(info.Members, RingMember{ID: m.ID, GRPCAddr: m.Addr, Partitions: load[m.ID]})
	}
	return info
}

// Namespaces returns the namespaces this node knows, sorted by name. It
// does not block.
func (a *API) Namespaces() []NamespaceInfo {
	recs := a.reg.List()
	usage := map[string]store.NamespaceUsage{}
	for _, u := range a.st.Namespaces() {
		usage[u.Namespace] = u
	}
	stats := a.st.NamespaceStats()
	out := make([]NamespaceInfo, 0, len(recs))
	for _, rec := range recs {
		sn := namespace.StoreName(rec.GetName(), rec.GetFingerprint())
		u, st := usage[sn], stats[sn]
		out = append(out, NamespaceInfo{
			Name:              rec.GetName(),
			Schema:            nsschema.FromProto(rec.GetSchema()),
			Fingerprint:       hex.EncodeToString(rec.GetFingerprint()),
			ReplicationFactor: rec.GetReplicationFactor(),
			MinReplicas:       rec.GetMinReplicas(),
			Created:           time.UnixMilli(rec.GetCreatedUnixMs()).UTC(),
			CreatedBy:         rec.GetCreatedBy(),
			Chunks:            u.Chunks,
			Bytes:             u.SlotBytes,
			DiskChunks:        u.DiskChunks,
			DiskBytes:         u.DiskBytes,
			Share:             st.Share,
			GuaranteeBytes:    st.GuaranteeBytes,
			CapBytes:          st.CapBytes,
			Evictions:         st.Evictions,
			Hits:              st.Hits,
			Misses:            st.Misses,
		})
	}
	return out
}

// Readiness reports whether the node serves and which condition is missing.
// It does not block.
//
// The API is made once the store is open, and the admin server is shut
// down before the store closes, so StoreOpen is true whenever the API can
// answer (the node answers a Readiness without it before Start).
func (a *API) Readiness() Readiness {
	rd := Readiness{Serving: a.ready(), StoreOpen: true}
	self := a.st.NodeID()
	rd.Joined = a.member.GossipAddr() != "" && slices.ContainsFunc(a.member.Ring().Members(),
		func(m ring.Member) bool { return m.ID == self })
	if err := a.st.Health(); err != nil {
		rd.StoreError = err.Error()
	} else {
		rd.StoreHealthy = true
	}
	if err := a.guard.Starved(); err != nil {
		rd.AcceptError = err.Error()
	} else {
		rd.Accepting = true
	}
	rd.DiskError = a.diskError()
	rd.Draining = a.draining.Load()
	rd.Ready = rd.StoreOpen && rd.Joined && rd.Serving && rd.StoreHealthy && rd.Accepting && !rd.Draining
	rd.Status = "not ready"
	if rd.Ready {
		rd.Status = "ready"
	}
	return rd
}

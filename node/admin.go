package node

import (
	"github.com/kvring/kvring/node/internal/admin"
	"github.com/kvring/kvring/node/internal/resp/respcoord"
	"github.com/kvring/kvring/node/membership"
)

// The admin API's answers, as the kvring CLI decodes them (their fields
// are documented in node/internal/admin, which serves them).
type (
	ClusterInfo      = admin.ClusterInfo
	ClusterMember    = admin.ClusterMember
	RingInfo         = admin.RingInfo
	RingMember       = admin.RingMember
	NamespaceInfo    = admin.NamespaceInfo
	NamespaceSchema  = admin.NamespaceSchema
	NamespaceShare   = admin.NamespaceShare
	Readiness        = admin.Readiness
	Stats            = admin.Stats
	DrainState       = admin.DrainState
	Forgotten        = admin.Forgotten
	DroppedNamespace = admin.DroppedNamespace
	// RESPLocation answers GET /v1/resp/locate; RESPKeyLocation is one
	// key's (respcoord.Location, respcoord.KeyLocation).
	RESPLocation    = respcoord.Location
	RESPKeyLocation = respcoord.KeyLocation
)

// newAdmin is the admin API over the started node's parts p (Start makes
// it before it publishes p).
func (n *Node) newAdmin(p *nodeParts) *admin.API {
	return admin.New(admin.Config{Store: p.store, Disk: p.disk, Registry: p.svc.Registry, Owner: p.svc.Owner,
		Coord: p.svc.Coord, Metrics: p.svc.Metrics, Member: p.member, Mover: p.mover, Guard: p.guard, Credentials: p.sec,
		RESP: p.resp, RESPCluster: p.respCluster, RESPClusterMode: n.cfg.RESP.ClusterMode, Build: n.cfg.Build,
		AdminActions: n.cfg.AdminActions, EnablePprof: n.cfg.EnablePprof, MetricsHandler: n.metricsHandler(),
		Ready: n.Ready, Draining: &n.draining, Now: n.cfg.Now, Logger: n.log})
}

// NodeID returns the node's id ("" before Start has opened the store). It
// does not block.
func (n *Node) NodeID() string {
	if p := n.parts.Load(); p != nil {
		return p.store.NodeID()
	}
	return ""
}

// Members returns the members this node knows, sorted by ID, this node
// included (nil before Start). It does not block.
func (n *Node) Members() []membership.Member {
	p := n.parts.Load()
	if p == nil {
		return nil
	}
	return p.member.Members()
}

// Cluster returns this node's view of the cluster (GET /v1/cluster). ok is
// false before Start has opened gossip. It does not block.
func (n *Node) Cluster() (info ClusterInfo, ok bool) {
	p := n.parts.Load()
	if p == nil {
		return ClusterInfo{}, false
	}
	return p.admin.Cluster(), true
}

// RingInfo returns the current ring's settings and load (GET /v1/ring). ok
// is false before Start has opened gossip. It does not block.
func (n *Node) RingInfo() (info RingInfo, ok bool) {
	p := n.parts.Load()
	if p == nil {
		return RingInfo{}, false
	}
	return p.admin.RingInfo(), true
}

// Namespaces returns the namespaces this node knows, sorted by name (nil
// before Start). It does not block.
func (n *Node) Namespaces() []NamespaceInfo {
	p := n.parts.Load()
	if p == nil {
		return nil
	}
	return p.admin.Namespaces()
}

// Readiness reports whether the node serves and which condition is missing
// (GET /readyz). It does not block.
func (n *Node) Readiness() Readiness {
	p := n.parts.Load()
	if p == nil {
		return Readiness{Serving: n.Ready(), Draining: n.draining.Load(), Status: "not ready"}
	}
	return p.admin.Readiness()
}

// DropNamespace removes namespace name from this node: its registry record
// and every chunk of it the store holds (pinned ones when their pins end).
// Engines of the namespace then get FailedPrecondition ("not registered") on
// their next call here, and register again if they mean to. An unknown
// name is refused (its error's text says so). Call it after Start.
func (n *Node) DropNamespace(name string) (DroppedNamespace, error) {
	return n.parts.Load().admin.DropNamespace(name)
}

package node

import "github.com/kvring/kvring/node/internal/localsock"

// newSocketCluster is the Cluster of the local socket's extensions.
func newSocketCluster(n *Node, p *nodeParts) localsock.Cluster { return nil }

package node

import (
	"crypto/tls"
	"fmt"

	"github.com/kvring/kvring/node/internal/security"
)

// SecurityConfig names the files holding a node's credentials (TLS, cluster
// key, engine tokens, gossip keys, admin token and admin TLS); every field
// is optional and off by default. node/internal/security reads and checks
// them; see security.Config for each field and docs/security.md.
type SecurityConfig = security.Config

// Reload reads the node's tokens file, admin token and certificates again
// (kvring serve calls it on SIGHUP). Files that cannot be read keep their
// previous contents in force, and the error names them. It does not block
// on the network; before Start it does nothing.
func (n *Node) Reload() error {
	p := n.parts.Load()
	if p == nil || p.sec == nil {
		return nil
	}
	if err := p.sec.Reload(); err != nil {
		return fmt.Errorf("cannot reload credentials: %w", err)
	}
	return nil
}

// secure reads the node's credentials (node/internal/security) and puts the admin
// listener behind TLS when the admin port has a certificate.
func (n *Node) secure(p *nodeParts) error {
	sec, err := security.Load(n.cfg.Security, n.log)
	if err != nil {
		return err
	}
	p.sec = sec
	if a := sec.AdminTLS(); a != nil {
		p.adminLis = tls.NewListener(p.adminLis, a)
	}
	return nil
}

package node

import (
	"time"

	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/store/disk"
)

// openDisk opens the disk tier when Config.Disk.Dir is set and returns the
// store's configuration with the tier as its Lower tier. The tier is opened
// before the store, which offloads into it from its first eviction, and
// closed after it (closeDisk). It blocks while the tier indexes its regions
// (one footer read per region).
func (n *Node) openDisk(p *nodeParts) (store.Config, error) {
	scfg := n.cfg.Store
	dcfg := n.cfg.Disk
	if dcfg.Dir == "" {
		return scfg, nil
	}
	t := time.Now()
	if dcfg.Logger == nil {
		dcfg.Logger = n.log.With("component", "disk")
	}
	if dcfg.Now == nil {
		dcfg.Now = n.cfg.Now
	}
	tier, err := disk.Open(dcfg)
	if err != nil {
		return scfg, err // "cannot open disk tier: ..."
	}
	p.disk = tier
	scfg.Lower = tier
	st := tier.Stats()
	n.phase("disk", t, "dir", dcfg.Dir, "limit_bytes", st.LimitBytes, "chunks", st.Chunks, "direct_io", st.DirectIO)
	return scfg, nil
}

// closeDisk writes the disk tier's queue out and closes it (nil when off).
func (n *Node) closeDisk(p *nodeParts) error {
	if p.disk == nil {
		return nil
	}
	return p.disk.Close() // idempotent
}

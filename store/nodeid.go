package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The node identity lives in the catalog. Two small files let a store whose
// catalog was lost keep it, or clean up after itself when it cannot:
// node_id in DataDir (a copy of the identity, written whenever it differs),
// and .data-dir in the node's segment directory (the absolute DataDir that
// owns it).

// nodeIDFile is the copy of the node identity in DataDir.
const nodeIDFile = "node_id"

// ownerFile, in a node's segment directory, names the DataDir that owns it.
const ownerFile = ".data-dir"

// readNodeIDFile returns the identity kept in dir/node_id, "" when there is
// none or it is not one openCatalogFile would make.
func readNodeIDFile(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, nodeIDFile))
	if err != nil {
		return ""
	}
	b = bytes.TrimSpace(b)
	if !validNodeID(b) {
		return ""
	}
	return string(b)
}

// writeNodeIDFile keeps id in dir/node_id (written to a temporary file and
// renamed over it), unless it is there already.
func writeNodeIDFile(dir, id string) error {
	if readNodeIDFile(dir) == id {
		return nil
	}
	tmp := filepath.Join(dir, nodeIDFile+".tmp")
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o640); err != nil {
		return fmt.Errorf("cannot write the node identity to %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, nodeIDFile)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write the node identity to %q: %w", dir, err)
	}
	return nil
}

// markOwner records dataDir (absolute) in the segment directory shmNode.
func markOwner(shmNode, dataDir string) error {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	p := filepath.Join(shmNode, ownerFile)
	if b, err := os.ReadFile(p); err == nil && string(b) == abs {
		return nil
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("cannot mark segment directory %q with its data directory: %w", shmNode, err)
	}
	_, werr := f.WriteString(abs)
	return errors.Join(werr, f.Close())
}

// removeOrphans removes the segment directories under ShmDir that this
// store's DataDir owned under another node identity (left when a corrupt
// catalog lost the identity, and with it the name of the directory) and no
// process uses, each with a log line. It returns how many it removed.
func (s *Store) removeOrphans() int {
	abs, err := filepath.Abs(s.cfg.DataDir)
	if err != nil {
		return 0
	}
	nodes, err := ListShmNodes(s.cfg.ShmDir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, n := range nodes {
		if n.Node == s.nodeID || n.InUse {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n.Dir, ownerFile))
		if err != nil || string(b) != abs {
			continue
		}
		if err := RemoveShmNode(s.cfg.ShmDir, n.Node); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.log.Error("cannot remove the segment directory this data directory left under a former node identity",
					"dir", n.Dir, "former_node", n.Node, "err", err)
			}
			continue
		}
		removed++
		s.log.Warn("removed the segment directory this data directory left under a former node identity (its catalog was lost)",
			"dir", n.Dir, "former_node", n.Node, "files", n.Files, "bytes", n.Bytes)
	}
	return removed
}

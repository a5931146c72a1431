package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// errCorruptCatalog: the catalog file cannot be read as a bbolt database
// (bbolt reports it invalid, or panics or faults while reading it).
var errCorruptCatalog = errors.New("catalog is corrupt")

// openCatalog opens (or creates) dir/catalog.db. A corrupt catalog does not
// stop the start: it is moved aside to catalog.db.corrupt-<unix seconds>
// (on the now clock), one error line names both paths, and a new catalog is
// created, so the store starts cold (recovery finds no segment records and
// removes this node's segment files). The node identity is kept when its
// record can still be read, or else from the copy in dir/node_id; only
// without both does the node get a new one (and Open then removes the
// segment directory the old identity left, see removeOrphans). Blocks on
// the disk; another process holding the catalog makes it fail after one
// second.
func openCatalog(dir string, log *slog.Logger, now func() time.Time) (*catalog, error) {
	path := filepath.Join(dir, "catalog.db")
	nodeID, err := checkCatalog(path)
	if err == nil {
		var c *catalog
		c, err = openCatalogFile(path, "")
		if err == nil {
			if err := c.startJournal(log, false); err != nil {
				return nil, err
			}
			return c, nil
		}
		if !errors.Is(err, errCorruptCatalog) {
			return nil, err
		}
	}
	if !errors.Is(err, errCorruptCatalog) {
		return nil, err
	}
	if nodeID == "" {
		nodeID = readNodeIDFile(dir) // the copy kept beside the catalog
	}
	aside, rerr := moveAside(path, now())
	if rerr != nil {
		return nil, fmt.Errorf("cannot move the corrupt catalog at %q aside: %w (%w)", path, rerr, err)
	}
	log.Error("the catalog is corrupt: moved aside, the store starts cold with no catalog",
		"path", path, "moved_to", aside, "node_id_kept", nodeID != "", "err", err)
	c, err := openCatalogFile(path, nodeID)
	if err != nil {
		return nil, err
	}
	if err := c.startJournal(log, true); err != nil {
		return nil, err
	}
	return c, nil
}

// startJournal replays the journal files left in the catalog's directory
// into bbolt (discard: removes them unread, as their changes belong to a
// catalog that was moved aside), removes them, and starts a new journal. A
// torn record ends its file's replay with a warning. On error the catalog
// is closed (the journals stay for the next open). Blocks on the disk.
func (c *catalog) startJournal(log *slog.Logger, discard bool) (err error) {
	defer func() {
		if err != nil {
			c.db.Close()
		}
	}()
	dir := filepath.Dir(c.path)
	paths, last, err := journalFiles(dir)
	if err != nil {
		return err
	}
	if !discard && len(paths) > 0 {
		if err := c.replay(paths, log); err != nil {
			return err
		}
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("cannot remove catalog journal %q: %w", p, err)
		}
	}
	c.jr, err = openJournal(dir, last+1)
	return err
}

// replay writes the changes of the journal files at paths, in order, into
// bbolt in one transaction and rereads the next segment id.
func (c *catalog) replay(paths []string, log *slog.Logger) error {
	var ops []catOp
	for _, p := range paths {
		got, err := readJournal(p)
		if errors.Is(err, errJournalTorn) {
			log.Warn("the catalog journal ends in a torn record: the changes before it are kept", "err", err)
		} else if err != nil {
			return err
		}
		ops = append(ops, got...)
	}
	if err := c.write(compactOps(ops)); err != nil {
		return fmt.Errorf("cannot fold the catalog journal into the catalog: %w", err)
	}
	return c.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyNextSegment); len(v) == 4 {
			c.nextSegment = binary.BigEndian.Uint32(v)
		}
		return nil
	})
}

// moveAside renames path to path.corrupt-<unix seconds>, with a numbered
// suffix when that name is taken, and returns the new name.
func moveAside(path string, now time.Time) (string, error) {
	base := fmt.Sprintf("%s.corrupt-%d", path, now.Unix())
	aside := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.%d", base, i)
	}
	return aside, os.Rename(path, aside)
}

// guardCorrupt runs f, which reads a bbolt file, and turns a panic or a
// memory fault inside it into an error wrapping errCorruptCatalog. It sets
// the goroutine's panic-on-fault mode meanwhile and restores it.
func guardCorrupt(f func() error) (err error) {
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading it panicked: %v", errCorruptCatalog, r)
		}
	}()
	return f()
}

// corruptOpenError reports whether an error of bolt.Open says the file's
// content is bad (rather than the file being locked or unreadable).
func corruptOpenError(err error) bool {
	return errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrVersionMismatch) ||
		errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrInvalidMapping)
}

// checkCatalog checks the catalog file at path (checkBoltFile) before bbolt
// opens it for writing. It holds bbolt's lock on the file meanwhile (so a
// catalog another process is writing is never judged, nor moved aside); a
// lock still held after one second is an error. It returns the node
// identity when its record could be read, even when the rest is damaged. A
// missing file is fine. Blocks on the disk.
func checkCatalog(path string) (nodeID string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cannot open catalog at %q: %w", path, err)
	}
	defer f.Close() // releases the lock
	if err := lockFile(f, time.Second); err != nil {
		return "", fmt.Errorf("cannot open catalog at %q: another process holds it (%w)", path, err)
	}
	err = guardCorrupt(func() error {
		var err error
		nodeID, err = checkBoltFile(f)
		return err
	})
	if !validNodeID([]byte(nodeID)) {
		nodeID = ""
	}
	if err != nil && !errors.Is(err, errCorruptCatalog) {
		err = fmt.Errorf("%w: %w", errCorruptCatalog, err)
	}
	return nodeID, err
}

// lockFile takes an exclusive flock on f, the lock bbolt takes, trying
// every lockRetry until timeout has passed. Blocks up to timeout.
func lockFile(f *os.File, timeout time.Duration) error {
	const lockRetry = 50 * time.Millisecond
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(lockRetry)
	}
}

// validNodeID reports whether id looks like an identity openCatalogFile
// made: 16 lowercase hex digits.
func validNodeID(id []byte) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// openCatalogFile opens (or creates) the catalog at path for writing and
// makes sure its buckets and node identity exist; a new identity is nodeID
// when it is not empty, random otherwise. A panic inside bbolt is an error
// wrapping errCorruptCatalog; the database is then not closed (bbolt may
// hold its own locks), which leaks its descriptor and mapping. Blocks on
// the disk.
func openCatalogFile(path, nodeID string) (*catalog, error) {
	var c *catalog
	err := guardCorrupt(func() error {
		db, err := bolt.Open(path, 0o640, &bolt.Options{Timeout: time.Second, NoSync: true, NoFreelistSync: true})
		if err != nil {
			if errors.Is(err, bolterrors.ErrTimeout) {
				return fmt.Errorf("cannot open catalog at %q: another process holds it", path)
			}
			if corruptOpenError(err) {
				return fmt.Errorf("%w: cannot open catalog at %q: %w", errCorruptCatalog, path, err)
			}
			return fmt.Errorf("cannot open catalog at %q: %w", path, err)
		}
		cat := &catalog{db: db, path: path, kick: make(chan struct{}, 1)}
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketMeta, bucketSegments, bucketChunks, bucketNamespaces, bucketShares} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			meta := tx.Bucket(bucketMeta)
			if v := meta.Get(keyNextSegment); len(v) == 4 {
				cat.nextSegment = binary.BigEndian.Uint32(v)
			}
			if v := meta.Get(keyNodeID); v != nil {
				cat.nodeID = string(v)
				return nil
			}
			cat.nodeID = nodeID
			if cat.nodeID == "" {
				var b [8]byte
				if _, err := rand.Read(b[:]); err != nil {
					return err
				}
				cat.nodeID = hex.EncodeToString(b[:])
			}
			return meta.Put(keyNodeID, []byte(cat.nodeID))
		})
		if err != nil {
			db.Close()
			return fmt.Errorf("cannot initialise catalog at %q: %w", path, err)
		}
		c = cat
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

package disk

import "golang.org/x/sys/unix"

// syncBacklog is how many sealed regions may wait for their fdatasync; a
// seal beyond it syncs on the writer's goroutine (back-pressure).
const syncBacklog = 4

// syncer is the tier's second goroutine: it fdatasyncs the regions the
// writer sealed, so that the writer goes on writing the next region
// meanwhile (a sync of a region written with direct I/O commits the
// filesystem's journal and flushes the device's cache: on a virtio disk
// about as long as writing the region again). Close waits for it after the
// writer: every sealed region is synced before Close returns.
func (t *Tier) syncer() {
	defer close(t.syncDone)
	for r := range t.syncq {
		t.syncRegion(r)
	}
}

// syncRegion fdatasyncs sealed region r and drops the reference that kept
// its file open for it. A failure leaves the region readable: its records
// were written, and a restart that finds its trailer lost scans it.
func (t *Tier) syncRegion(r *region) {
	if err := unix.Fdatasync(r.fd); err != nil {
		t.log.Warn("cannot sync a sealed disk region; after a host crash the next start scans it", "region", r.path, "err", err)
	}
	t.mu.Lock()
	r.refs--
	t.closeRegion(r)
	t.mu.Unlock()
}

// syncLater hands sealed region r to the syncer, or syncs it now when the
// syncer is behind. The caller took a reference on r for it. Writer only.
func (t *Tier) syncLater(r *region) {
	select {
	case t.syncq <- r:
	default:
		t.syncRegion(r)
	}
}

package namespace

import (
	"context"
	"fmt"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Defaults are the replication settings of a namespace whose first client
// does not choose, and the bound every client's choice must keep.
type Defaults struct {
	// Replicas and MinReplicas apply when the first client leaves them 0.
	Replicas, MinReplicas uint32
	// MaxReplicas is the ring's replication factor: the most owners a
	// namespace may ask for.
	MaxReplicas uint32
}

// Broadcast offers rec to every other member of the cluster and returns the
// record a member holds for the same name that wins over rec (see Wins), or
// nil. It blocks for at most its own bound.
type Broadcast func(ctx context.Context, rec *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord

// Registration is a client's request to register a namespace, or to check
// its schema against the registered one.
type Registration struct {
	Name                  string
	Schema                *kvringv1.NamespaceSchema
	Replicas, MinReplicas uint32 // 0: the cluster's default
	Self                  string // the node that registers (the record's created_by)
	Now                   time.Time
}

// Register registers reg cluster-wide, or checks it against the registered
// record, and returns the record and whether this call created it. A
// namespace this node does not know is created here and offered to every
// member (broadcast); a record registered earlier elsewhere wins. A different
// schema, replication factor or min replicas under the same name is
// ErrSchemaMismatch naming what differs; bad input is ErrInvalidArgument
// naming the field. Blocks in broadcast only.
func (r *Registry) Register(ctx context.Context, reg Registration, d Defaults, broadcast Broadcast) (*kvringv1.NamespaceRecord, bool, error) {
	if err := checkRegistration(reg, d, r.Get(reg.Name) == nil); err != nil {
		return nil, false, err
	}
	fp := Fingerprint(reg.Schema)
	cur := r.Get(reg.Name)
	created := false
	if cur == nil {
		var err error
		if cur, created, err = r.Merge(newRecord(reg, d, fp)); err != nil {
			return nil, false, err
		}
		if winner := broadcast(ctx, cur); winner != nil {
			if held, _, err := r.MergePeer(winner); err == nil {
				cur = held
			}
			created = created && cur.GetCreatedBy() == reg.Self && string(cur.GetFingerprint()) == string(fp)
		}
	}
	if err := matches(cur, reg, fp); err != nil {
		return nil, false, err
	}
	return cur, created, nil
}

// Check checks reg against the record this node holds for its name and
// returns the record, without creating one: a name this node does not know
// is ErrUnknownNamespace. It is what a client's read asks (it must not
// register a namespace nothing was written to); a mismatch and bad input
// are as for Register. It does not block.
func (r *Registry) Check(reg Registration, d Defaults) (*kvringv1.NamespaceRecord, error) {
	if err := checkRegistration(reg, d, false); err != nil {
		return nil, err
	}
	cur := r.Get(reg.Name)
	if cur == nil {
		return nil, fmt.Errorf("%w: namespace %q is not registered: nothing was written to it (reads do not register a namespace)",
			transfer.ErrUnknownNamespace, reg.Name)
	}
	if err := matches(cur, reg, Fingerprint(reg.Schema)); err != nil {
		return nil, err
	}
	return cur, nil
}

// checkRegistration validates the schema and the replication settings.
// fresh: the namespace is new to this node, so the defaults will apply.
func checkRegistration(reg Registration, d Defaults, fresh bool) error {
	if err := ValidateSchema(reg.Name, reg.Schema); err != nil {
		return err
	}
	rf, minR := reg.Replicas, reg.MinReplicas
	switch {
	case rf > d.MaxReplicas || minR > d.MaxReplicas:
		return fmt.Errorf("%w: replication_factor %d / min_replicas %d: at most %d",
			transfer.ErrInvalidArgument, rf, minR, d.MaxReplicas)
	case rf != 0 && minR > rf:
		return fmt.Errorf("%w: min_replicas %d is above replication_factor %d", transfer.ErrInvalidArgument, minR, rf)
	case rf == 0 && minR > d.Replicas && fresh:
		return fmt.Errorf("%w: min_replicas %d is above the default replication factor %d: set replication_factor too",
			transfer.ErrInvalidArgument, minR, d.Replicas)
	}
	return nil
}

// newRecord is the record a first registration creates.
func newRecord(reg Registration, d Defaults, fp []byte) *kvringv1.NamespaceRecord {
	rec := &kvringv1.NamespaceRecord{Name: reg.Name, Schema: reg.Schema, Fingerprint: fp,
		ReplicationFactor: max(1, d.Replicas), MinReplicas: max(1, d.MinReplicas),
		CreatedUnixMs: reg.Now.UnixMilli(), CreatedBy: reg.Self}
	if reg.Replicas != 0 {
		rec.ReplicationFactor = reg.Replicas
	}
	if reg.MinReplicas != 0 {
		rec.MinReplicas = reg.MinReplicas
	}
	if rec.GetMinReplicas() > rec.GetReplicationFactor() {
		rec.MinReplicas = rec.GetReplicationFactor() // the node default exceeds the client's factor
	}
	return rec
}

// matches checks a registration against the record the cluster holds.
func matches(cur *kvringv1.NamespaceRecord, reg Registration, fp []byte) error {
	if string(cur.GetFingerprint()) != string(fp) {
		return fmt.Errorf("%w: namespace %q is registered with a different schema: %s",
			transfer.ErrSchemaMismatch, reg.Name, Diff(cur.GetSchema(), reg.Schema))
	}
	if reg.Replicas != 0 && reg.Replicas != cur.GetReplicationFactor() {
		return fmt.Errorf("%w: namespace %q has replication_factor %d, the client asked for %d",
			transfer.ErrSchemaMismatch, reg.Name, cur.GetReplicationFactor(), reg.Replicas)
	}
	if reg.MinReplicas != 0 && reg.MinReplicas != cur.GetMinReplicas() {
		return fmt.Errorf("%w: namespace %q has min_replicas %d, the client asked for %d",
			transfer.ErrSchemaMismatch, reg.Name, cur.GetMinReplicas(), reg.MinReplicas)
	}
	return nil
}

// Lister lists the namespaces one peer knows.
type Lister func(ctx context.Context) ([]*kvringv1.NamespaceRecord, error)

// SyncFrom merges the namespaces of the first peer that answers, trying them
// in order, and returns how many records it sent and its position in peers
// (-1: none answered). A node that joins learns this way the namespaces
// registered before it. Blocks in the listers, until ctx ends.
func (r *Registry) SyncFrom(ctx context.Context, peers []Lister) (learned, from int) {
	for i, list := range peers {
		if ctx.Err() != nil {
			break
		}
		recs, err := list(ctx)
		if err != nil {
			continue
		}
		for _, rec := range recs {
			_, _, _ = r.MergePeer(rec) // a record that fails its checks is not taken
		}
		return len(recs), i
	}
	return 0, -1
}

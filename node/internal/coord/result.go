package coord

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvring/kvring/node/internal/metrics"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// result decides the fate of the chunk at batch index idx from its owners'
// votes and commits. Stored means held by at least minReplicas nodes
// (degraded below the replication factor); no holder means rejected (every
// owner's policy or budget declined) or failed (with every owner's reason).
func (tx *writeTx) result(idx uint32) *kvringv1.PutChunkResult {
	r := &kvringv1.PutChunkResult{Index: idx}
	if len(tx.owners[idx]) == 0 {
		r.Status, r.Reason = kvringv1.PutStatus_PUT_STATUS_FAILED, "no member takes new chunks: every member is draining"
		return r
	}
	var reasons []string
	r.Holders = make([]*kvringv1.NodeRef, 0, len(tx.owners[idx]))
	newly, allRejected := false, true
	for _, s := range tx.owners[idx] {
		if s.failed != nil {
			reasons = append(reasons, s.failed.Error())
			allRejected = false
			if r.Code == 0 {
				r.Code = transfer.WireCode(s.cause)
			}
			continue
		}
		holder := s.holderRef()
		if s.sealed[s.toShare[idx]] {
			r.Holders = append(r.Holders, holder)
			newly = true
			continue
		}
		v := s.vote(idx)
		switch v.GetVote() {
		case kvringv1.Vote_VOTE_ALREADY_HELD:
			r.Holders = append(r.Holders, holder)
			if r.HeldCrc32C == 0 {
				r.HeldCrc32C = v.GetHeldCrc32C()
			}
		case kvringv1.Vote_VOTE_REJECTED:
			reasons = append(reasons, fmt.Sprintf("node %s: %s", s.member.ID, v.GetReason()))
			if r.Code == 0 {
				r.Code = v.GetCode() // REJECTED or NO_SPACE: the client can tell them apart
			}
		case kvringv1.Vote_VOTE_READY:
			reasons = append(reasons, fmt.Sprintf("node %s: voted ready but was not committed", s.member.ID))
			allRejected = false
		default:
			reason := v.GetReason()
			if v == nil {
				reason = "no vote"
			}
			reasons = append(reasons, fmt.Sprintf("node %s: %s", s.member.ID, reason))
			allRejected = false
			if r.Code == 0 {
				r.Code = v.GetCode()
			}
		}
	}
	switch {
	case len(r.Holders) >= tx.minReplicas:
		r.Code = 0 // held: a rejection by some owner is only a reason
		r.Status = kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD
		if newly {
			r.Status = kvringv1.PutStatus_PUT_STATUS_STORED
			r.HeldCrc32C = 0 // ALREADY_HELD only
		}
		r.Degraded = len(r.Holders) < tx.replicas
		if r.Degraded {
			r.Reason = strings.Join(reasons, "; ")
		}
	case len(r.Holders) == 0 && allRejected:
		r.HeldCrc32C = 0
		r.Status = kvringv1.PutStatus_PUT_STATUS_REJECTED
		r.Reason = strings.Join(reasons, "; ")
	default:
		r.HeldCrc32C = 0
		r.Status = kvringv1.PutStatus_PUT_STATUS_FAILED
		if len(r.Holders) > 0 {
			reasons = append([]string{fmt.Sprintf("held by %d of the %d required replicas", len(r.Holders), tx.minReplicas)}, reasons...)
		}
		r.Reason = strings.Join(reasons, "; ")
	}
	return r
}

// results decides the fate of every chunk the engine has no answer for yet.
func (tx *writeTx) results() []*kvringv1.PutChunkResult {
	out := make([]*kvringv1.PutChunkResult, 0, len(tx.need)+len(tx.deferred))
	for _, idx := range slices.Concat(tx.need, tx.deferred) {
		out = append(out, tx.result(idx))
	}
	return out
}

// putLabel is the kvring_put_chunks_total label of a result.
func putLabel(s kvringv1.PutStatus) string {
	switch s {
	case kvringv1.PutStatus_PUT_STATUS_STORED:
		return metrics.PutStored
	case kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD:
		return metrics.PutAlreadyHeld
	case kvringv1.PutStatus_PUT_STATUS_REJECTED:
		return metrics.PutRejected
	}
	return metrics.PutFailed
}

// countPut counts the chunk results the engine is sent.
func (c *Coordinator) countPut(results []*kvringv1.PutChunkResult, chunks []*kvringv1.ChunkRef) {
	for _, r := range results {
		counters := c.m.PutBy[putLabel(r.GetStatus())]
		counters.Chunks.Inc()
		if i := int(r.GetIndex()); i < len(chunks) {
			counters.Bytes.Add(float64(chunks[i].GetSize()))
		}
		if r.GetDegraded() {
			c.m.PutDegraded.Inc()
		}
	}
}

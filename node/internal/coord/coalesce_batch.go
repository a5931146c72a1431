package coord

import (
	"bytes"
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// Which queued Has requests share a call, and how a merged call's answer is
// split. Requests share a call when they name the same namespace (name and
// fingerprint), pin nothing, agree on report_staging and on carrying groups
// (an owner counts a request's groups only when its runs cover every id),
// and carry at most MaxBatch ids together. The owner counts one lookup of a
// group per run of equal keys it sees in a row (spread.Counter.Asked), so two
// requests that end and begin with the same group are never put side by
// side: merged, they would count as one lookup. Such a request goes alone,
// at once.

// pickBatch splits queue (oldest first, non-empty) into the batch its
// first request leads, the requests that can share it but not sit next to
// it (sent alone now), and the rest (queued for the next call).
func pickBatch(queue []*hasWait, maxBatch int) (batch, alone, rest []*hasWait) {
	batch = []*hasWait{queue[0]}
	ids := len(queue[0].req.GetIds())
	for _, w := range queue[1:] {
		n := len(w.req.GetIds())
		switch {
		case !canShare(queue[0].req, w.req) || ids+n > maxBatch:
			rest = append(rest, w)
			continue
		case apart(batch[len(batch)-1].req, w.req):
			batch = append(batch, w)
		case apart(w.req, batch[0].req):
			batch = append([]*hasWait{w}, batch...)
		default:
			alone = append(alone, w)
			continue
		}
		ids += n
	}
	return batch, alone, rest
}

// canShare reports whether two unpinned requests can be sent as one.
func canShare(a, b *kvringv1.HasRequest) bool {
	return a.GetNamespace().GetName() == b.GetNamespace().GetName() &&
		bytes.Equal(a.GetNamespace().GetFingerprint(), b.GetNamespace().GetFingerprint()) &&
		a.GetReportStaging() == b.GetReportStaging() &&
		(len(a.GetGroups()) > 0) == (len(b.GetGroups()) > 0)
}

// apart reports whether b may follow a in one request without the owner
// counting a's last group and b's first as one lookup.
func apart(a, b *kvringv1.HasRequest) bool {
	ga, gb := a.GetGroups(), b.GetGroups()
	return len(ga) == 0 || len(gb) == 0 || !bytes.Equal(ga[len(ga)-1].GetKey(), gb[0].GetKey())
}

// mergeHas is the one request that asks what the batch's requests ask, in
// batch order: their ids and group runs concatenated, the latest caller
// epoch among them.
func mergeHas(batch []*hasWait) *kvringv1.HasRequest {
	ids, runs := hasTotals(batch)
	first := batch[0].req
	req := &kvringv1.HasRequest{Caller: first.GetCaller(), Namespace: first.GetNamespace(), ReportStaging: first.GetReportStaging(),
		Ids: make([][]byte, 0, ids)}
	if runs > 0 {
		req.Groups = make([]*kvringv1.GroupRun, 0, runs)
	}
	for _, w := range batch {
		if w.req.GetCaller().GetEpoch() > req.GetCaller().GetEpoch() {
			req.Caller = w.req.GetCaller()
		}
		req.Ids = append(req.Ids, w.req.GetIds()...)
		req.Groups = append(req.Groups, w.req.GetGroups()...)
	}
	return req
}

// splitHas hands each member of batch its share of a merged call's answer:
// held and staging by its range of ids, spread widths by its range of runs,
// epoch, load and lease time as they are (they describe the owner, not an
// id). A failed call fails each member with the call's error; an answer of
// the wrong length fails each with an error that says so. Staging or widths
// of the wrong length (an older owner) are left out, as for a request sent
// alone.
func splitHas(batch []*hasWait, resp *kvringv1.HasResponse, err error) {
	ids, runs := hasTotals(batch)
	if err == nil && len(resp.GetHeld()) != ids {
		err = fmt.Errorf("merged has: the owner answered %d of %d ids", len(resp.GetHeld()), ids)
	}
	if err != nil {
		for _, w := range batch {
			w.resp, w.err = nil, err
		}
		return
	}
	held, staging, widths := resp.GetHeld(), resp.GetStaging(), resp.GetSpreadWidth()
	if len(staging) != ids {
		staging = nil
	}
	if len(widths) != runs {
		widths = nil
	}
	lo, rlo := 0, 0
	for _, w := range batch {
		hi, rhi := lo+len(w.req.GetIds()), rlo+len(w.req.GetGroups())
		part := &kvringv1.HasResponse{Epoch: resp.GetEpoch(), LeaseTtlMs: resp.GetLeaseTtlMs(), Load: resp.GetLoad(), Held: held[lo:hi:hi]}
		if staging != nil {
			part.Staging = staging[lo:hi:hi]
		}
		if widths != nil && rhi > rlo {
			part.SpreadWidth = widths[rlo:rhi:rhi]
		}
		w.resp, w.err = part, nil
		lo, rlo = hi, rhi
	}
}

// hasTotals counts the ids and group runs of a batch.
func hasTotals(batch []*hasWait) (ids, runs int) {
	for _, w := range batch {
		ids += len(w.req.GetIds())
		runs += len(w.req.GetGroups())
	}
	return ids, runs
}

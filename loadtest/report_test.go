package loadtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.95: 95 * time.Millisecond,
		0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := percentile(d, q); got != want {
			t.Errorf("p%v = %s, want %s", q*100, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 || percentile(d[:1], 0.99) != time.Millisecond {
		t.Error("percentile of empty or one-sample input")
	}
}

func TestTalliesMergeIntoTheReport(t *testing.T) {
	var a, b tally
	a.requests, a.chunks, a.chunkHits, a.tokens, a.tokenHit = 1, 10, 4, 160, 64
	b.requests, b.chunks, b.chunkHits, b.tokens, b.tokenHit = 2, 30, 6, 480, 96
	a.put.record(2*time.Millisecond, 6, 6000, nil)
	b.put.record(4*time.Millisecond, 24, 24000, nil)
	b.put.record(time.Millisecond, 5, 5000, errors.New("boom"))
	a.byOutcome[Stored], b.byOutcome[Stored], b.byOutcome[Rejected], b.byOutcome[Failed] = 6, 20, 4, 5
	a.corrupt, b.missingAfterAck, b.getMisses = 0, 2, 3

	a.merge(&b)
	r := Report{Elapsed: time.Second}
	a.fill(&r)
	if r.RequestsDone != 3 || r.Chunks != 40 || r.ChunkHits != 10 || r.ChunkHitRatio != 0.25 || r.TokenHitRatio != 0.25 {
		t.Fatalf("hit figures: %+v", r)
	}
	if r.Put.Calls != 3 || r.Put.Errors != 1 || r.Put.Chunks != 30 || r.Put.Bytes != 30000 ||
		r.Put.OpsPerSec != 3 || r.Put.GBPerSec != 30000/1e9 || r.Put.P50Ms != 2 || r.Put.P99Ms != 4 || r.Put.FirstError != "boom" {
		t.Fatalf("put stats: %+v", r.Put)
	}
	if r.Stored != 26 || r.Rejected != 4 || r.Failed != 5 || r.MissingAfterAck != 2 || r.GetMisses != 3 {
		t.Fatalf("outcomes: %+v", r)
	}

	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stored=26 already_held=0 rejected=4 failed=5", "missing_after_ack=2", "unknown (no admin", "put ", "first put error: boom"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.Put != r.Put || back.Stored != 26 {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
}

func TestTableShowsTheTimelineWhenSomethingFailedOrAsked(t *testing.T) {
	two := []TimelinePoint{{T: 0, Len: 1, Requests: 3}, {T: 1, Len: 0.5, Requests: 1, Errors: 2}}
	for _, tc := range []struct {
		name      string
		r         Report
		asked     bool
		wantShown bool
	}{
		{"clean run", Report{Timeline: two}, false, false},
		{"clean run, asked", Report{Timeline: two}, true, true},
		{"failed calls", Report{Timeline: two, Get: OpStats{Errors: 2}}, false, true},
		{"failed chunks", Report{Timeline: two, Failed: 1}, false, true},
		{"one point", Report{Timeline: two[:1], Failed: 1}, true, false},
	} {
		var buf bytes.Buffer
		write := tc.r.WriteTable
		if tc.asked {
			write = tc.r.WriteTableWithTimeline
		}
		if err := write(&buf); err != nil {
			t.Fatal(err)
		}
		if shown := strings.Contains(buf.String(), "timeline, every 1s"); shown != tc.wantShown {
			t.Errorf("%s: timeline shown %v, want %v:\n%s", tc.name, shown, tc.wantShown, buf.String())
		}
	}
}

// TestPutOutcomesAreTheSDKsStatuses: a backend's put outcomes are the SDK's
// PutStatus values, named in reports as the report's fields and counted as
// held exactly when stored or already held.
func TestPutOutcomesAreTheSDKsStatuses(t *testing.T) {
	for o, want := range map[PutOutcome]string{Stored: "stored", AlreadyHeld: "already_held", Rejected: "rejected", Failed: "failed"} {
		if o.String() != want {
			t.Errorf("%d: String() = %q, want %q", int(o), o, want)
		}
		if held := o == Stored || o == AlreadyHeld; o.Held() != held {
			t.Errorf("%s: Held() = %v, want %v", o, o.Held(), held)
		}
	}
	if int(Stored) != 1 || int(Failed) != 4 {
		t.Errorf("Stored..Failed = %d..%d, want 1..4 (the report's per-outcome counters are indexed by them)", int(Stored), int(Failed))
	}
}

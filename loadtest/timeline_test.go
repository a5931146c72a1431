package loadtest

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestTimelineKeepsEmptyIntervalsAndEndsWithTheRun(t *testing.T) {
	start := time.Unix(1000, 0)
	var a, b timeline
	a = timeline{start: start, interval: time.Second}
	b = timeline{start: start, interval: time.Second}
	a.at(start.Add(100*time.Millisecond)).requests++
	a.at(start.Add(100 * time.Millisecond)).putBytes += 2e9
	b.at(start.Add(900*time.Millisecond)).errors++
	b.at(start.Add(2500 * time.Millisecond)).requests += 3
	b.at(start.Add(2500 * time.Millisecond)).chunks += 4
	b.at(start.Add(2500*time.Millisecond)).hits++
	a.merge(&b)

	pts := a.points(2750 * time.Millisecond)
	if len(pts) != 3 {
		t.Fatalf("%d points, want 3: %+v", len(pts), pts)
	}
	if p := pts[0]; p.T != 0 || p.Len != 1 || p.Requests != 1 || p.Errors != 1 || p.PutGBPerSec != 2 || p.RequestsPerSec != 1 {
		t.Fatalf("first point %+v", p)
	}
	if p := pts[1]; p.T != 1 || p.Len != 1 || p != (TimelinePoint{T: 1, Len: 1}) {
		t.Fatalf("an empty interval is a zero point, got %+v", p)
	}
	if p := pts[2]; p.T != 2 || p.Len != 0.75 || p.RequestsPerSec != 4 || p.ChunkHitRatio != 0.25 {
		t.Fatalf("last, partial point %+v", p)
	}
	if pts := (&timeline{start: start, interval: time.Second}).points(0); len(pts) != 0 {
		t.Fatalf("a run that took no time has %d points", len(pts))
	}
}

func TestTimelineTableMergesPointsBeyondItsRowLimit(t *testing.T) {
	var pts []TimelinePoint
	for i := range 3 * maxTimelineRows {
		p := TimelinePoint{T: float64(i), Len: 1, Requests: 2, RequestsPerSec: 2}
		if i == 100 {
			p.Errors, p.Failed = 5, 7
		}
		pts = append(pts, p)
	}
	rows := coarsen(pts, 3)
	if len(rows) != maxTimelineRows || rows[33].T != 99 || rows[33].Len != 3 || rows[33].Errors != 5 ||
		rows[33].Failed != 7 || rows[33].RequestsPerSec != 2 {
		t.Fatalf("%d rows; row 33: %+v", len(rows), rows[33])
	}
	var buf bytes.Buffer
	if err := writeTimeline(&buf, pts); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2+maxTimelineRows || !strings.Contains(lines[0], "every 3s") {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if f := strings.Fields(lines[2+33]); f[0] != "99" || f[5] != "5" || f[6] != "7" {
		t.Fatalf("row at 99s: %q", lines[2+33])
	}
}

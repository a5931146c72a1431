package loadtest

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// TimelinePoint is what happened during one interval of a run. Each count is
// attributed to the interval in which it was observed: a request when it
// completed, a call's bytes, errors and put outcomes when the call returned.
// Summed over a report's points, the counts equal the report's totals.
type TimelinePoint struct {
	// T is the start of the interval in seconds since the run started; Len
	// is its length in seconds (Config.TimelineInterval, except for the last
	// point, which ends with the run).
	T   float64 `json:"t_s"`
	Len float64 `json:"len_s"`

	Requests       int64   `json:"requests"` // completed in the interval
	RequestsPerSec float64 `json:"requests_per_sec"`
	// Chunks and ChunkHits are those of the requests completed in the
	// interval.
	Chunks        int64   `json:"chunks"`
	ChunkHits     int64   `json:"chunk_hits"`
	ChunkHitRatio float64 `json:"chunk_hit_ratio"`
	// PutBytes are the bytes of the chunks the backend acknowledged holding
	// (stored or already held); GetBytes those Get returned.
	PutBytes    int64   `json:"put_bytes"`
	PutGBPerSec float64 `json:"put_gb_per_sec"` // 1e9 bytes per second
	GetBytes    int64   `json:"get_bytes"`
	GetGBPerSec float64 `json:"get_gb_per_sec"`
	// Errors are lookup, get and put calls that failed as a whole.
	Errors int64 `json:"errors"`
	// Failed and Rejected count put chunks by outcome, as Report's fields
	// of the same names (a failed put call fails all its chunks).
	Failed   int64 `json:"failed"`
	Rejected int64 `json:"rejected"`
}

// timelineBucket is what one engine counted during one interval.
type timelineBucket struct {
	requests, chunks, hits   int64
	putBytes, getBytes       int64
	errors, failed, rejected int64
}

func (b *timelineBucket) add(o *timelineBucket) {
	b.requests += o.requests
	b.chunks += o.chunks
	b.hits += o.hits
	b.putBytes += o.putBytes
	b.getBytes += o.getBytes
	b.errors += o.errors
	b.failed += o.failed
	b.rejected += o.rejected
}

// timeline counts one engine's events by interval since start. It is not
// safe for concurrent use; each engine has its own.
type timeline struct {
	start    time.Time
	interval time.Duration
	buckets  []timelineBucket
}

// at returns the bucket of the interval that contains now.
func (tl *timeline) at(now time.Time) *timelineBucket {
	i := max(int(now.Sub(tl.start)/tl.interval), 0)
	for len(tl.buckets) <= i {
		tl.buckets = append(tl.buckets, timelineBucket{})
	}
	return &tl.buckets[i]
}

func (tl *timeline) merge(o *timeline) {
	for len(tl.buckets) < len(o.buckets) {
		tl.buckets = append(tl.buckets, timelineBucket{})
	}
	for i := range o.buckets {
		tl.buckets[i].add(&o.buckets[i])
	}
	if tl.interval == 0 {
		tl.start, tl.interval = o.start, o.interval
	}
}

// points returns one point per interval of a run of length elapsed, empty
// intervals included; nil when the run took no time and counted nothing.
func (tl *timeline) points(elapsed time.Duration) []TimelinePoint {
	if tl.interval <= 0 {
		return nil
	}
	n := max(int((elapsed+tl.interval-1)/tl.interval), len(tl.buckets))
	out := make([]TimelinePoint, n)
	for i := range out {
		var b timelineBucket
		if i < len(tl.buckets) {
			b = tl.buckets[i]
		}
		from := time.Duration(i) * tl.interval
		to := min(from+tl.interval, max(elapsed, from))
		out[i] = b.point(from, to-from)
	}
	return out
}

func (b *timelineBucket) point(from, length time.Duration) TimelinePoint {
	p := TimelinePoint{T: from.Seconds(), Len: length.Seconds(), Requests: b.requests, Chunks: b.chunks,
		ChunkHits: b.hits, ChunkHitRatio: ratio(b.hits, b.chunks), PutBytes: b.putBytes, GetBytes: b.getBytes,
		Errors: b.errors, Failed: b.failed, Rejected: b.rejected}
	if sec := length.Seconds(); sec > 0 {
		p.RequestsPerSec = float64(b.requests) / sec
		p.PutGBPerSec = float64(b.putBytes) / sec / 1e9
		p.GetGBPerSec = float64(b.getBytes) / sec / 1e9
	}
	return p
}

// maxTimelineRows bounds the rows of the text timeline; longer timelines are
// shown with adjacent points merged.
const maxTimelineRows = 60

// coarsen merges every k adjacent points into one.
func coarsen(points []TimelinePoint, k int) []TimelinePoint {
	if k <= 1 {
		return points
	}
	var out []TimelinePoint
	for lo := 0; lo < len(points); lo += k {
		var b timelineBucket
		var length float64
		for _, p := range points[lo:min(lo+k, len(points))] {
			length += p.Len
			b.add(&timelineBucket{requests: p.Requests, chunks: p.Chunks, hits: p.ChunkHits, putBytes: p.PutBytes,
				getBytes: p.GetBytes, errors: p.Errors, failed: p.Failed, rejected: p.Rejected})
		}
		out = append(out, b.point(seconds(points[lo].T), seconds(length)))
	}
	return out
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// writeTimeline prints points as a table of at most maxTimelineRows rows.
func writeTimeline(w io.Writer, points []TimelinePoint) error {
	if len(points) == 0 {
		return nil
	}
	k := (len(points) + maxTimelineRows - 1) / maxTimelineRows
	rows := coarsen(points, k)
	step := points[0].Len * float64(k)
	fmt.Fprintf(w, "timeline, every %s (errors: failed calls; failed, rejected: put chunks)\n", seconds(step).Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "T S\tREQ/S\tHIT RATIO\tPUT GB/S\tGET GB/S\tERRORS\tFAILED\tREJECTED\t")
	for _, p := range rows {
		fmt.Fprintf(tw, "%g\t%.1f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%d\t\n", math.Round(p.T*1000)/1000, p.RequestsPerSec, p.ChunkHitRatio,
			p.PutGBPerSec, p.GetGBPerSec, p.Errors, p.Failed, p.Rejected)
	}
	return tw.Flush()
}

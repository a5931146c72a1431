package placement

import (
	"fmt"
	"io"
	"strings"
)

// Goals are the targets a scheme is judged against (issue 18).
type Goals struct {
	AskedMean  float64 // mean lookup calls per request, at most
	AccessSkew float64 // busiest node's lookup calls over the mean, at most
	StoredSkew float64 // fullest node's stored copies over the mean, at most
	MovedRatio float64 // data moved by one join over the ideal 1/(N+1), at most (mean over joiners)
}

// DefaultGoals returns the targets: ≤ 8 nodes asked, access skew ≤ 1.5, stored skew ≤ 1.1, moves ≤
// 1.2× the ideal.
func DefaultGoals() Goals {
	return Goals{AskedMean: 8, AccessSkew: 1.5, StoredSkew: 1.1, MovedRatio: 1.2}
}

// Check returns one letter per goal in the order asked, access, stored, moved: the goal's initial in upper
// case when r meets it, "-" when it does not. "ASTM" meets all four.
func (g Goals) Check(r Result) string {
	mark := func(ok bool, c byte) byte {
		if ok {
			return c
		}
		return '-'
	}
	return string([]byte{
		mark(r.AskedMean <= g.AskedMean, 'A'),
		mark(r.AccessSkew <= g.AccessSkew, 'S'),
		mark(r.StoredSkew <= g.StoredSkew, 'T'),
		mark(r.MovedRatio <= g.MovedRatio, 'M'),
	})
}

// WriteTable writes results as a Markdown table, one row per result, in the order given.
func WriteTable(w io.Writer, results []Result, g Goals) error {
	var b strings.Builder
	b.WriteString("| trace | N | scheme | asked mean | asked p99 | round trips | access skew (floor) | read skew | stored skew (floor) | extra stored | moved / ideal (worst) | ring moved / ideal | goals |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %s | %.2f | %.0f | %.2f | %.2f (%.2f) | %.2f | %.2f (%.2f) | %.1f%% | %.2f (%.2f) | %.2f | %s |\n",
			r.Workload, r.Nodes, r.Scheme, r.AskedMean, r.AskedP99, r.RoundTripsMean, r.AccessSkew, r.AccessFloor,
			r.ReadSkew, r.StoredSkew, r.StoredFloor, 100*r.ExtraStored, r.MovedRatio, r.MovedMaxRatio, r.PartitionMovedRatio, g.Check(r))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("cannot write the table: %w", err)
	}
	return nil
}

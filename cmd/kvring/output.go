package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// humanBytes formats a byte count with a binary unit: "512 B", "1.5 GiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for ; (v >= unit || v <= -unit) && i < 5; i++ {
		v /= unit
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}

// humanDuration formats a duration to the second, or "-" for none.
func humanDuration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// percent formats part/whole as a percentage, or "-" when whole is 0.
func percent(part, whole float64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

// oneLine folds a message onto one line: newlines (errors.Join, multi-line
// server messages) become "; " and runs of space collapse.
func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
	return strings.Join(strings.Fields(s), " ")
}

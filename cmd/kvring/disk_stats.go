package main

import (
	"fmt"
	"io"

	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/store/disk"
)

// printDiskStats prints the disk tier's part of `kvring stats` (nothing
// when the node runs none).
func printDiskStats(w io.Writer, st *disk.Stats) error {
	if st == nil {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, a...)...) }
	direct := "direct I/O"
	if !st.DirectIO {
		direct = "buffered I/O"
	}
	row("disk tier", "%s (%s)", st.Dir, direct)
	state := "ok"
	if st.Degraded != "" {
		state = "DEGRADED: " + st.Degraded
	}
	row("disk state", "%s", state)
	row("disk used", "%s of %s (%s) in %d regions of %s", humanBytes(st.UsedBytes), humanBytes(st.LimitBytes),
		percent(float64(st.UsedBytes), float64(st.LimitBytes)), st.Regions, humanBytes(st.RegionBytes))
	row("disk chunks", "%d (%s payload)", st.Chunks, humanBytes(st.PayloadBytes))
	row("disk queue", "%d chunks (%s)", st.QueuedChunks, humanBytes(st.QueuedBytes))
	row("disk reads", "%d (%d hits, %s; %d from the queue), %s read", st.Reads, st.Hits,
		percent(float64(st.Hits), float64(st.Reads)), st.QueueHits, humanBytes(st.ReadBytes))
	row("disk offloads", "%d written (%s), %d already held", st.Offloads, humanBytes(st.WriteBytes), st.AlreadyHeld)
	row("disk drops", "%s", loadtest.ByReason(st.Drops))
	row("disk errors", "%d checksum, %d read", st.ChecksumErrors, st.ReadErrors)
	row("disk evictions", "%d regions, %d chunks", st.RegionsEvicted, st.ChunksEvicted)
	return tw.Flush()
}

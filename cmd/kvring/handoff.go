package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

func newHandoffCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "handoff",
		Short: "Show what one node's hand-off moved: chunks copied to their owners, evicted, pending, under-replicated",
		Long: `Show the hand-off of the node at --admin (GET /v1/handoff): totals since the node
started (chunks and bytes copied to the owners the ring gives them, chunks evicted
once their owners held them, failed copies) and its last pass (what it found misplaced,
what is still pending, chunks with fewer holders than their replication factor, members
it could not reach, the first errors).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			body, err := af.get(cmd.Context(), "/v1/handoff")
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var st node.HandoffStatus
			if err := af.decode(body, &st); err != nil {
				return err
			}
			return printHandoff(cmd.OutOrStdout(), st)
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

func printHandoff(w io.Writer, st node.HandoffStatus) error {
	tw := newTable(w)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, a...)...) }
	state := "idle"
	if st.Running {
		state = "a pass is running"
	}
	row("state", "%s (%d passes)", state, st.Passes)
	row("copied", "%d chunks (%s)", st.CopiedChunks, humanBytes(st.CopiedBytes))
	row("evicted after hand-off", "%d chunks", st.EvictedChunks)
	row("failed copies", "%d", st.FailedCopies)
	l := st.Last
	if !l.Started.IsZero() {
		row("last pass", "%s, took %v, ring epoch %d", l.Started.UTC().Format(time.RFC3339), l.Ended.Sub(l.Started).Round(time.Millisecond), l.Epoch)
		row("  held", "%d chunks, %d of them owned elsewhere", l.Held, l.Misplaced)
		row("  copied", "%d chunks (%s), %d evicted, %d copies failed", l.Copied, humanBytes(l.CopiedBytes), l.Evicted, l.FailedCopies)
		row("  pending", "%d chunks still here that belong elsewhere", l.Pending)
		row("  under-replicated", "%d chunks", l.Underreplicated)
		if len(l.Unreachable) > 0 {
			row("  unreachable", "%s", strings.Join(l.Unreachable, ", "))
		}
		if l.SpreadKept > 0 {
			row("  spread copies", "%d chunks kept here while their hot groups are spread (not moved, not evicted)", l.SpreadKept)
		}
		if l.UnknownPlacement > 0 {
			row("  unknown placement", "%d chunks (stored without their group key by an earlier release; never moved)", l.UnknownPlacement)
		}
		for _, e := range l.Errors {
			row("  error", "%s", e)
		}
	}
	return tw.Flush()
}

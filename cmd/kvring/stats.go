package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/store"
)

func newStatsCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show one node's store accounting, per tier",
		Long: `Show the store accounting of the node at --admin (GET /v1/stats): memory used
against the limit, chunks held, staged writes, pins, evictions and rejections;
and, when the node runs a disk tier (--disk-dir), its bytes, chunks, hits,
offloads, drops, read and write bytes and queue depth; then each namespace's
memory on this node against its share (GUARANTEE and CAP in bytes of this
node's limit), its evictions and the share of lookup ids found held.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			body, err := af.get(cmd.Context(), "/v1/stats")
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var st node.Stats
			if err := af.decode(body, &st); err != nil {
				return err
			}
			if err := printStats(cmd.OutOrStdout(), st.Stats); err != nil {
				return err
			}
			if err := printDiskStats(cmd.OutOrStdout(), st.Disk); err != nil {
				return err
			}
			body, err = af.get(cmd.Context(), "/v1/namespaces")
			if err != nil {
				return err
			}
			var nss struct {
				Namespaces []node.NamespaceInfo `json:"namespaces"`
			}
			if err := af.decode(body, &nss); err != nil {
				return err
			}
			return printNamespaceUsage(cmd.OutOrStdout(), nss.Namespaces, st.LimitBytes)
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

func printStats(w io.Writer, st store.Stats) error {
	tw := newTable(w)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, a...)...) }
	row("node", "%s", st.NodeID)
	row("memory used", "%s of %s (%s)", humanBytes(st.UsedBytes), humanBytes(st.LimitBytes),
		percent(float64(st.UsedBytes), float64(st.LimitBytes)))
	row("chunks", "%d (%s payload, %s allocator waste)", st.Chunks, humanBytes(st.PayloadBytes), humanBytes(st.WasteBytes()))
	row("staged", "%d chunks (%s)", st.StagedChunks, humanBytes(st.StagedBytes))
	row("pinned", "%d chunks", st.PinnedChunks)
	row("retained free", "%s", humanBytes(st.RetainedFreeBytes))
	row("resident", "%s in %d segments", humanBytes(st.ResidentBytes), st.Segments)
	row("gets", "%d (%d hits, %s; %d from the disk tier, %d promoted back)", st.Gets, st.Hits,
		percent(float64(st.Hits), float64(st.Gets)), st.LowerHits, st.Promotions)
	row("stages / seals", "%d / %d (%d stages expired)", st.Stages, st.Seals, st.StageExpired)
	row("evictions", "%s", loadtest.ByReason(st.Evictions))
	row("rejections", "%s", loadtest.ByReason(st.Rejections))
	row("checksum errors", "%d", st.ChecksumErrors)
	return tw.Flush()
}

// printNamespaceUsage prints, for one node, each namespace's memory against
// its share there, its evictions and its lookup hits. Nothing when no
// namespace is registered.
func printNamespaceUsage(w io.Writer, nss []node.NamespaceInfo, limit int64) error {
	if len(nss) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintf(tw, "NAMESPACE\tMEMORY\tOF LIMIT\tGUARANTEE\tCAP\tEVICTED\tHITS\n")
	bound := func(b int64) string {
		if b == 0 {
			return "-"
		}
		return humanBytes(b)
	}
	for _, ns := range nss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", ns.Name, humanBytes(ns.Bytes), percent(float64(ns.Bytes), float64(limit)),
			bound(ns.GuaranteeBytes), bound(ns.CapBytes), ns.Evictions, percent(float64(ns.Hits), float64(ns.Hits+ns.Misses)))
	}
	return tw.Flush()
}

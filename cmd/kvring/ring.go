package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

func newRingCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "ring",
		Short: "Show how the ring's partitions are spread over the members",
		Long: `Show the ring of the node at --admin (GET /v1/ring): its epoch and settings, and
how many partitions each member is primary for, against the load bound.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			body, err := af.get(cmd.Context(), "/v1/ring")
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var info node.RingInfo
			if err := af.decode(body, &info); err != nil {
				return err
			}
			return printRing(cmd.OutOrStdout(), info)
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

func printRing(w io.Writer, info node.RingInfo) error {
	fmt.Fprintf(w, "ring epoch %d as seen by %s: %d partitions over %d members, load bound %d per member "+
		"(load factor %g), replication up to %d, placement version %d, settings %s\n", info.Epoch, info.NodeID, info.PartitionCount,
		len(info.Members), info.MaxLoad, info.LoadFactor, info.ReplicationFactor, info.Placement, info.Fingerprint)
	tw := newTable(w)
	fmt.Fprintln(tw, "MEMBER\tGRPC\tPARTITIONS\tSHARE\tOF BOUND")
	total := 0
	for _, m := range info.Members {
		total += m.Partitions
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", m.ID, m.GRPCAddr, m.Partitions,
			percent(float64(m.Partitions), float64(info.PartitionCount)), percent(float64(m.Partitions), float64(info.MaxLoad)))
	}
	fmt.Fprintf(tw, "TOTAL\t\t%d\t%s\t\n", total, percent(float64(total), float64(info.PartitionCount)))
	return tw.Flush()
}

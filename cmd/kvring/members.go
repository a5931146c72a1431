package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

func newMembersCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members as one node sees them",
		Long: `List the cluster's members as the node at --admin sees them (GET /v1/cluster):
each member's state, gossip liveness, whether it owns partitions, its addresses
and how long it has been up. Members that died or left stay listed for 10 minutes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			body, err := af.get(cmd.Context(), "/v1/cluster")
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var info node.ClusterInfo
			if err := af.decode(body, &info); err != nil {
				return err
			}
			return printMembers(cmd.OutOrStdout(), info, time.Now())
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

func printMembers(w io.Writer, info node.ClusterInfo, now time.Time) error {
	alive := 0
	for _, m := range info.Members {
		if m.Liveness == "alive" {
			alive++
		}
	}
	fmt.Fprintf(w, "%d members, %d alive; ring epoch %d as seen by %s\n", len(info.Members), alive, info.Epoch, info.NodeID)
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSTATE\tLIVENESS\tOWNS\tGRPC\tADMIN\tGOSSIP\tUP")
	for _, m := range info.Members {
		id, owns, up := m.ID, "no", "-"
		if m.Self {
			id += " *"
		}
		if m.RingMember {
			owns = "yes"
		}
		if m.Liveness == "alive" && !m.BootTime.IsZero() {
			up = humanDuration(now.Sub(m.BootTime))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, m.State, m.Liveness, owns, m.GRPCAddr, m.AdminAddr, m.GossipAddr, up)
	}
	return tw.Flush()
}

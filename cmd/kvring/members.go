package main

import (
	"cmp"
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
each member's state, gossip liveness, whether it owns partitions, its addresses,
how long it has been up and its build (version and commit; "before v0.4.0" for
a build that gossips none). Members that died or left stay listed for 10 minutes;
a member removed with "kvring forget" shows the state "forgotten" until it joins
again.`,
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
	alive, forgotten := 0, 0
	for _, m := range info.Members {
		if m.Liveness == "alive" {
			alive++
		}
		if m.Forgotten {
			forgotten++
		}
	}
	also := ""
	if forgotten > 0 {
		also = fmt.Sprintf(", %d forgotten (kvring forget: they own nothing until they join again)", forgotten)
	}
	fmt.Fprintf(w, "%d members, %d alive%s; ring epoch %d as seen by %s\n", len(info.Members), alive, also, info.Epoch, info.NodeID)
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSTATE\tLIVENESS\tOWNS\tGRPC\tADMIN\tGOSSIP\tUP\tVERSION\tCOMMIT")
	for _, m := range info.Members {
		id, state, owns, up := m.ID, m.State, "no", "-"
		if m.Forgotten {
			state = "forgotten" // its own last word (active) would say the opposite
		}
		if m.Self {
			id += " *"
		}
		if m.RingMember {
			owns = "yes"
		}
		if m.Liveness == "alive" && !m.BootTime.IsZero() {
			up = humanDuration(now.Sub(m.BootTime))
		}
		version, commit := cmp.Or(m.Version, "before v0.4.0"), cmp.Or(m.Commit, "unknown")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, state, m.Liveness, owns, m.GRPCAddr, m.AdminAddr,
			m.GossipAddr, up, version, commit)
	}
	return tw.Flush()
}

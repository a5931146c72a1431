package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/store"
)

// newShmCmd lists and removes the nodes' segment directories in a
// shared-memory directory on this host: a node that will not come back
// leaves its chunks there, holding memory, until someone removes them.
func newShmCmd() *cobra.Command {
	shmDir := node.DefaultConfig().Store.ShmDir
	cmd := &cobra.Command{
		Use:   "shm",
		Short: "List or remove nodes' shared-memory segments on this host",
		Long: `Each node keeps its chunk bytes in its own directory under --shm-dir,
kvring-<node id>/, locked while the node runs. A node that stopped keeps its
segments there (a restart with the same data directory serves them again);
one that will not come back holds that memory until "kvring shm remove".`,
		Args: cobra.NoArgs,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the nodes' segment directories with their size and whether a running node uses them (its pid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			nodes, err := store.ListShmNodes(shmDir)
			if err != nil {
				return err
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintf(tw, "NODE\tFILES\tMEMORY\tIN USE\tDIRECTORY\n")
			for _, n := range nodes {
				use := "no"
				switch {
				case n.InUse && n.PID > 0:
					use = fmt.Sprintf("yes (pid %d)", n.PID)
				case n.InUse:
					use = "yes"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", n.Node, n.Files, humanBytes(n.Bytes), use, n.Dir)
			}
			return tw.Flush()
		},
	}
	remove := &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Remove a stopped node's segments, freeing their memory (refused while the node runs)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			if err := store.RemoveShmNode(shmDir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed the segments of node %s\n", args[0])
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, remove} {
		c.Flags().StringVar(&shmDir, "shm-dir", shmDir, "directory of the shared-memory segment files (as given to kvring serve)")
		annotateEnv(c.Flags())
		cmd.AddCommand(c)
	}
	return cmd
}

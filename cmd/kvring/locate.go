package main

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

func newLocateCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "locate KEY...",
		Short: "Show which members hold Redis-protocol keys",
		Long: `Show where Redis-protocol keys live, as the node at --admin maps them
(GET /v1/resp/locate): each key's namespace, Redis Cluster slot and placement
slot (in --resp-cluster mode a "<k>metadata" key is placed by its
"<k>kv_bytes" key's slot), its owners on the ring and the members that hold it
now. Members that could not be asked are named: they may hold the key too.
The node must serve the Redis-protocol port; at most 256 keys at once.`,
		Args: cobra.RangeArgs(1, 256),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			q := url.Values{"key": args}
			body, err := af.get(cmd.Context(), "/v1/resp/locate?"+q.Encode())
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var loc node.RESPLocation
			if err := af.decode(body, &loc); err != nil {
				return err
			}
			return printLocation(cmd.OutOrStdout(), loc)
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

func printLocation(w io.Writer, loc node.RESPLocation) error {
	mode := "standalone"
	if loc.ClusterMode {
		mode = "Redis Cluster mode"
	}
	fmt.Fprintf(w, "ring epoch %d as seen by %s (%s)\n", loc.RingEpoch, loc.Node, mode)
	tw := newTable(w)
	fmt.Fprintln(tw, "KEY\tNAMESPACE\tSLOT\tPLACE SLOT\tOWNERS\tHOLDERS\tUNANSWERED")
	for _, k := range loc.Keys {
		holders := strings.Join(k.Holders, ",")
		switch {
		case k.NotRegistered:
			holders = "none (namespace not registered)"
		case holders == "":
			holders = "none"
		}
		var un []string
		for id, why := range k.Unanswered {
			un = append(un, id+": "+oneLine(why))
		}
		sort.Strings(un)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", k.Key, k.Namespace, k.Slot, k.PlaceSlot, strings.Join(k.Owners, ","),
			holders, strings.Join(un, "; "))
	}
	return tw.Flush()
}

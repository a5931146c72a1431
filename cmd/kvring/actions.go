package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

// The admin API's write actions: drain and undrain act on the node at
// --admin; namespaces and drop-namespace ask every alive member (from that
// node's member table); evict acts on one node. The nodes allow them with
// an admin token (--admin-token) or when started with --admin-actions.

func newDrainCmd(on bool) *cobra.Command {
	var af adminFlags
	use, short, path := "drain", "Drain a node: it keeps serving what it holds but takes no new chunks, and reports not ready", "/v1/drain"
	if !on {
		use, short, path = "undrain", "Undo drain: the node takes new chunks and reports ready again", "/v1/undrain"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			body, err := af.call(cmd.Context(), http.MethodPost, af.addr, path)
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var st node.DrainState
			if err := af.decode(body, &st); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s draining: %v\n", st.Node, st.Draining)
			return nil
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

// aliveMembers returns the admin addresses of the alive members the node at
// af.addr knows.
func aliveMembers(cmd *cobra.Command, af *adminFlags) ([]node.ClusterMember, error) {
	body, err := af.get(cmd.Context(), "/v1/cluster")
	if err != nil {
		return nil, err
	}
	var info node.ClusterInfo
	if err := af.decode(body, &info); err != nil {
		return nil, err
	}
	var out []node.ClusterMember
	for _, m := range info.Members {
		if m.Liveness == "alive" {
			out = append(out, m)
		}
	}
	return out, nil
}

// fanOut sends method path to every alive member the node at af.addr lists,
// except skip, one after the other, and hands each answer to each. It
// returns how many members answered and the failures, one per member that
// did not (or whose answer each refused).
func fanOut(cmd *cobra.Command, af *adminFlags, method, path, skip string,
	each func(m node.ClusterMember, body []byte) error) (answered int, failed []error, err error) {
	return fanOutWith(cmd, af, method, path, nil, skip, each)
}

// fanOutWith is fanOut sending reqBody (JSON; nil for none) to each member.
func fanOutWith(cmd *cobra.Command, af *adminFlags, method, path string, reqBody []byte, skip string,
	each func(m node.ClusterMember, body []byte) error) (answered int, failed []error, err error) {
	members, err := aliveMembers(cmd, af)
	if err != nil {
		return 0, nil, err
	}
	for _, m := range members {
		if m.ID == skip {
			continue
		}
		body, err := af.callWith(cmd.Context(), method, m.AdminAddr, path, reqBody)
		if err == nil {
			err = each(m, body)
		}
		if err != nil {
			failed = append(failed, err)
			continue
		}
		answered++
	}
	return answered, failed, nil
}

func newNamespacesCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "namespaces",
		Short: "List the namespaces with the chunks and bytes every alive member holds of each, and their shares",
		Long: `List the namespaces registered in the cluster, with the chunks and bytes every
alive member (as the node at --admin lists them) holds of each. GROUP is a
grouped namespace's placement group size in chunks ("-" when each chunk is
placed by its own id). GUARANTEE and CAP are the namespace's share of each
node's memory ("namespaces set"; "mixed" when the members differ), EVICTED the
chunks the members' eviction evicted and HITS the share of ids lookups found
held in memory. With --json the
answer is one object: {"members": M, "answered": A, "namespaces": [...]}, each
namespace with its schema, replication, the chunks and bytes summed over the
members and "nodes", how many members know it. Members that do not answer are
reported and the command exits non-zero, after printing what the others said.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			all := map[string]*clusterNamespace{}
			answered, failed, err := fanOut(cmd, &af, http.MethodGet, "/v1/namespaces", "", func(_ node.ClusterMember, body []byte) error {
				var resp struct {
					Namespaces []node.NamespaceInfo `json:"namespaces"`
				}
				if err := af.decode(body, &resp); err != nil {
					return err
				}
				for _, ns := range resp.Namespaces {
					t := all[ns.Name]
					if t == nil {
						t = &clusterNamespace{NamespaceInfo: ns}
						t.Chunks, t.Bytes, t.DiskChunks, t.DiskBytes, t.Evictions, t.Hits, t.Misses = 0, 0, 0, 0, 0, 0, 0
						all[ns.Name] = t
					}
					t.add(ns)
				}
				return nil
			})
			if err != nil {
				return err
			}
			list := clusterNamespaces{Members: answered + len(failed), Answered: answered, Namespaces: []clusterNamespace{}}
			for _, n := range slices.Sorted(maps.Keys(all)) {
				list.Namespaces = append(list.Namespaces, *all[n])
			}
			if err := printNamespaces(cmd.OutOrStdout(), list, af.json); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %d members did not answer (the figures leave them out); first: %v", len(failed), list.Members, failed[0])
			}
			return nil
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	cmd.AddCommand(newNamespacesSetCmd())
	return cmd
}

// clusterNamespaces is what `kvring namespaces --json` prints.
type clusterNamespaces struct {
	// Members were asked; Answered answered (the figures cover those).
	Members    int                `json:"members"`
	Answered   int                `json:"answered"`
	Namespaces []clusterNamespace `json:"namespaces"`
}

// clusterNamespace is one namespace over the members that answered: its
// record, with Chunks and Bytes summed over them, and how many know it.
type clusterNamespace struct {
	node.NamespaceInfo
	Nodes int `json:"nodes"`
	// SharesDiffer: the members do not all enforce the same share (the
	// share shown is the first member's).
	SharesDiffer bool `json:"shares_differ,omitempty"`
}

// add sums one member's figures into t.
func (t *clusterNamespace) add(ns node.NamespaceInfo) {
	t.Chunks += ns.Chunks
	t.Bytes += ns.Bytes
	t.DiskChunks += ns.DiskChunks
	t.DiskBytes += ns.DiskBytes
	t.Evictions += ns.Evictions
	t.Hits += ns.Hits
	t.Misses += ns.Misses
	t.Nodes++
	if ns.Share != t.Share {
		t.SharesDiffer = true
	}
}

// printNamespaces prints the namespaces as a table, or as JSON.
func printNamespaces(w io.Writer, list clusterNamespaces, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "NAMESPACE\tMODEL\tGROUP\tCHUNKS\tMEMORY\tDISK\tGUARANTEE\tCAP\tEVICTED\tHITS\tREPLICATION\tNODES\n")
	for _, t := range list.Namespaces {
		g, c := amountString(t.Share.Guarantee), amountString(t.Share.Cap)
		if t.SharesDiffer {
			g, c = "mixed", "mixed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%d of %d\n", t.Name, t.Schema.Model,
			groupColumn(t.Schema.ChunksPerGroup), t.Chunks, humanBytes(t.Bytes), diskColumn(t.DiskChunks, t.DiskBytes), g, c, t.Evictions,
			percent(float64(t.Hits), float64(t.Hits+t.Misses)), t.MinReplicas, t.ReplicationFactor, t.Nodes, list.Members)
	}
	return tw.Flush()
}

// diskColumn is the DISK column of `kvring namespaces`: the chunks and
// payload bytes the members' disk tiers hold of the namespace, "-" when none.
func diskColumn(chunks, bytes int64) string {
	if chunks == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%s)", chunks, humanBytes(bytes))
}

// groupColumn is the GROUP column of `kvring namespaces`: the placement group
// size in chunks, or "-" for a namespace that places each chunk by its own id.
func groupColumn(chunksPerGroup uint32) string {
	if chunksPerGroup <= 1 {
		return "-"
	}
	return strconv.FormatUint(uint64(chunksPerGroup), 10)
}

func newDropNamespaceCmd() *cobra.Command {
	var af adminFlags
	cmd := &cobra.Command{
		Use:   "drop-namespace NAME",
		Short: "Remove a namespace and every chunk of it from every alive member, printing what each freed",
		Long: `Remove namespace NAME from every alive member (as the node at --admin lists them):
its registry record and its chunks (chunks pinned by a lookup go when their lease
ends). Engines of the namespace get "not registered" on their next call and
register again if they mean to. Members that do not answer are reported and
the command exits non-zero; run it again once they are back.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			var drops []node.DroppedNamespace
			dropped, failed, err := fanOut(cmd, &af, http.MethodDelete, "/v1/namespaces/"+url.PathEscape(args[0]), "",
				func(_ node.ClusterMember, body []byte) error {
					var d node.DroppedNamespace
					if err := af.decode(body, &d); err != nil {
						return err
					}
					drops = append(drops, d)
					return nil
				})
			if err != nil {
				return err
			}
			if err := printDrops(cmd.OutOrStdout(), drops, af.json); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("namespace %q dropped on %d of %d members; first failure: %v", args[0], dropped, dropped+len(failed), failed[0])
			}
			return nil
		},
	}
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

// printDrops prints what each node freed: a table, or a JSON array.
func printDrops(w io.Writer, drops []node.DroppedNamespace, asJSON bool) error {
	if asJSON {
		if drops == nil {
			drops = []node.DroppedNamespace{}
		}
		return json.NewEncoder(w).Encode(drops)
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "NODE\tCHUNKS FREED\tMEMORY FREED\tPINNED (GO WHEN THEIR LEASE ENDS)\n")
	for _, d := range drops {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", d.Node, d.Chunks, humanBytes(d.Bytes), d.PinnedChunks)
	}
	return tw.Flush()
}

func newEvictCmd() *cobra.Command {
	var af adminFlags
	var ns, id string
	cmd := &cobra.Command{
		Use:   "evict --namespace NAME --id HEX",
		Short: "Remove one chunk from the node at --admin (to debug a bad chunk)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			if ns == "" || id == "" {
				return fmt.Errorf("evict needs --namespace and --id")
			}
			body, err := af.call(cmd.Context(), http.MethodDelete, af.addr, "/v1/namespaces/"+url.PathEscape(ns)+"/chunks/"+url.PathEscape(id))
			if err != nil {
				return err
			}
			if af.json {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "evicted chunk %s of namespace %s\n", id, ns)
			return nil
		},
	}
	cmd.Flags().StringVar(&ns, "namespace", "", "namespace of the chunk")
	cmd.Flags().StringVar(&id, "id", "", "chunk id, 64 hex characters")
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

func newForgetCmd() *cobra.Command {
	var af adminFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "forget NODE_ID",
		Short: "Remove a dead member from every member's ring at once, instead of waiting for gossip",
		Long: `Remove member NODE_ID from the ring of every other alive member (as the node at
--admin lists them), at once: gossip takes seconds to declare a killed node dead,
and writes to it fail meanwhile. A member whose gRPC address still answers is
alive and is refused unless --force. A forgotten member owns nothing until it
joins the cluster again (a restart).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			path := "/v1/members/" + url.PathEscape(args[0])
			if force {
				path += "?force=true"
			}
			done, failed, err := fanOut(cmd, &af, http.MethodDelete, path, args[0], func(m node.ClusterMember, _ []byte) error {
				fmt.Fprintf(cmd.OutOrStdout(), "%s forgot %s\n", m.ID, args[0])
				return nil
			})
			if err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("member %s forgotten by %d of %d members; first failure: %v", args[0], done, done+len(failed), failed[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "forget the member even though it answers (it then owns nothing until it restarts)")
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

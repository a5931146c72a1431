package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/store"
)

// parseAmount reads a share bound: a percentage of each node's memory
// limit ("25%"), a size ("8GiB", as --memory-limit takes), or "0"/"none".
func parseAmount(v string) (store.Amount, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "none" || v == "0" {
		return store.Amount{}, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f < 0 || f > 100 {
			return store.Amount{}, fmt.Errorf("%q is not a percentage from 0 to 100", v)
		}
		return store.Amount{Percent: f}, nil
	}
	var b byteSize
	if err := b.Set(v); err != nil {
		return store.Amount{}, fmt.Errorf("%q is neither a percentage (25%%) nor a size (8GiB)", v)
	}
	return store.Amount{Bytes: int64(b)}, nil
}

// amountString spells a share bound as the operator set it ("-" for none).
func amountString(a store.Amount) string {
	switch {
	case a.Percent > 0:
		return strconv.FormatFloat(a.Percent, 'f', -1, 64) + "%"
	case a.Bytes > 0:
		b := byteSize(a.Bytes)
		return b.String()
	}
	return "-"
}

func newNamespacesSetCmd() *cobra.Command {
	var af adminFlags
	var guarantee, capArg string
	cmd := &cobra.Command{
		Use:   "set NAME [--guarantee SIZE|PCT] [--cap SIZE|PCT]",
		Short: "Set a namespace's share of each node's memory on every alive member",
		Long: `Set namespace NAME's share of each node's memory (--memory-limit) on every alive
member, as the node at --admin lists them. Each node enforces the share against
its own budget, since each evicts on its own: 25% means a quarter of every
node's memory, 8GiB eight GiB of every node's.

--guarantee: other namespaces' writes never evict NAME's chunks while it holds
no more than this on a node. The guarantees of all namespaces add up to at most
100 %; a share that would exceed it is refused.
--cap: the most NAME holds on a node; beyond it, NAME's writes evict its own
oldest chunks, never another namespace's.

The share given replaces the one in force: a bound left out is none, and with
neither the share is removed (one LRU over all chunks, as without shares). The
namespace's record carries it: a node that joins later, or was down, learns it
with the namespace, and each node keeps it in its catalog across restarts. Needs
the lru eviction policy. Members that do not answer are reported and the command
exits non-zero (they learn the share from the others when they come back).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			var sh store.Share
			var err error
			if sh.Guarantee, err = parseAmount(guarantee); err != nil {
				return fmt.Errorf("--guarantee: %w", err)
			}
			if sh.Cap, err = parseAmount(capArg); err != nil {
				return fmt.Errorf("--cap: %w", err)
			}
			body, _ := json.Marshal(sh)
			var set []node.NamespaceShare
			done, failed, err := fanOutWith(cmd, &af, http.MethodPut, "/v1/namespaces/"+url.PathEscape(args[0])+"/share", body, "",
				func(_ node.ClusterMember, body []byte) error {
					var s node.NamespaceShare
					if err := af.decode(body, &s); err != nil {
						return err
					}
					set = append(set, s)
					return nil
				})
			if err != nil {
				return err
			}
			if err := printShares(cmd.OutOrStdout(), set, af.json); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("share of namespace %q set on %d of %d members; first failure: %v", args[0], done, done+len(failed), failed[0])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&guarantee, "guarantee", "", "memory of each node the namespace keeps whatever others write: a percentage (25%) or a size (8GiB)")
	cmd.Flags().StringVar(&capArg, "cap", "", "most memory of each node the namespace may hold: a percentage (50%) or a size (16GiB)")
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

// printShares prints the share each node now enforces: a table, or a JSON
// array.
func printShares(w io.Writer, set []node.NamespaceShare, asJSON bool) error {
	if asJSON {
		if set == nil {
			set = []node.NamespaceShare{}
		}
		return json.NewEncoder(w).Encode(set)
	}
	if len(set) == 0 {
		return nil // every member refused: the error says why
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "NODE\tNAMESPACE\tGUARANTEE\tCAP\tHOLDS\tLIMIT\n")
	for _, s := range set {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, s.Namespace, boundColumn(s.Share.Guarantee, s.GuaranteeBytes),
			boundColumn(s.Share.Cap, s.CapBytes), humanBytes(s.Bytes), humanBytes(s.LimitBytes))
	}
	return tw.Flush()
}

// boundColumn is a share bound as set, with its bytes per node when it is a
// percentage: "25% (64MiB)", "8GiB", "-".
func boundColumn(a store.Amount, perNode int64) string {
	if a.Percent > 0 {
		return fmt.Sprintf("%s (%s)", amountString(a), humanBytes(perNode))
	}
	return amountString(a)
}

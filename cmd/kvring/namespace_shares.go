package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "set NAME [--guarantee SIZE|PCT] [--cap SIZE|PCT]",
		Short: "Set a namespace's share of each node's memory, and wait until every alive member enforces it",
		Long: `Set namespace NAME's share of each node's memory (--memory-limit) on the node at
--admin, and wait until every alive member enforces it: the namespace's record
carries the share to the other members, so it is set once, on one node. Each
node enforces the share against its own budget, since each evicts on its own:
25% means a quarter of every node's memory, 8GiB eight GiB of every node's.

--guarantee: other namespaces' writes never evict NAME's chunks while it holds
no more than this on a node. The guarantees of all namespaces add up to at most
100 %; a share that would exceed it is refused.
--cap: the most NAME holds on a node; beyond it, NAME's writes evict its own
oldest chunks, never another namespace's.

The share given replaces the one in force: a bound left out is none, and with
neither the share is removed (one LRU over all chunks, as without shares). A node
that joins later, or was down, learns it with the namespace, and each node keeps
it in its catalog across restarts. Needs the lru eviction policy. Prints the
share each alive member enforces; members that do not enforce it within --wait
(one that cannot keep it logs why; or it does not answer) are reported and the
command exits non-zero.`,
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
			path := "/v1/namespaces/" + url.PathEscape(args[0]) + "/share"
			body, _ := json.Marshal(sh)
			answer, err := af.callWith(cmd.Context(), http.MethodPut, af.addr, path, body)
			if err != nil {
				return err
			}
			var first node.NamespaceShare
			if err := af.decode(answer, &first); err != nil {
				return err
			}
			set, behind, err := awaitShare(cmd, &af, path, first, wait)
			if err != nil {
				return err
			}
			if err := printShares(cmd.OutOrStdout(), set, af.json); err != nil {
				return err
			}
			if len(behind) > 0 {
				return fmt.Errorf("share of namespace %q set on %s; %d of %d alive members do not enforce it after %s; first: %v",
					args[0], first.Node, len(behind), len(set)+len(behind), wait, behind[0])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&guarantee, "guarantee", "", "memory of each node the namespace keeps whatever others write: a percentage (25%) or a size (8GiB)")
	cmd.Flags().StringVar(&capArg, "cap", "", "most memory of each node the namespace may hold: a percentage (50%) or a size (16GiB)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long to wait for every alive member to enforce the share")
	af.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

// awaitShare asks every alive member (GET path) for the share it enforces
// until each enforces first.Share or wait has passed, and returns each
// enforcing member's answer (first's node's included) and why each other
// member does not. Blocks for at most wait plus one round of calls.
func awaitShare(cmd *cobra.Command, af *adminFlags, path string, first node.NamespaceShare, wait time.Duration) ([]node.NamespaceShare, []error, error) {
	members, err := aliveMembers(cmd, af)
	if err != nil {
		return nil, nil, err
	}
	done := map[string]node.NamespaceShare{first.Node: first}
	deadline := time.Now().Add(wait)
	for {
		var behind []error
		for _, m := range members {
			if _, ok := done[m.ID]; ok {
				continue
			}
			if err := shareOf(cmd, af, m, path, first.Share, done); err != nil {
				behind = append(behind, err)
			}
		}
		if len(behind) == 0 || time.Now().After(deadline) {
			var set []node.NamespaceShare
			for _, m := range members {
				if s, ok := done[m.ID]; ok {
					set = append(set, s)
				}
			}
			return set, behind, nil
		}
		select {
		case <-cmd.Context().Done():
			return nil, nil, cmd.Context().Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shareOf records in done member m's answer when it enforces want, and
// otherwise says what it enforces, or why it did not answer.
func shareOf(cmd *cobra.Command, af *adminFlags, m node.ClusterMember, path string, want store.Share, done map[string]node.NamespaceShare) error {
	body, err := af.callWith(cmd.Context(), http.MethodGet, m.AdminAddr, path, nil)
	if err != nil {
		return err
	}
	var s node.NamespaceShare
	if err := af.decode(body, &s); err != nil {
		return err
	}
	if s.Share != want {
		return fmt.Errorf("member %s enforces guarantee %s, cap %s (a member that cannot keep a share logs why)",
			m.ID, amountString(s.Share.Guarantee), amountString(s.Share.Cap))
	}
	done[m.ID] = s
	return nil
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

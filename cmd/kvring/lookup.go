package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/client"
)

func newLookupCmd() *cobra.Command {
	var (
		df      dataFlags
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "lookup --namespace NS ID...",
		Short: "Count how many leading chunk ids are held",
		Long: `Ask how many of the given chunk ids, counted from the first, are held now by a
reachable node: the length of the cached prefix. Ids are 64 hex characters.
A namespace nothing was written to is not registered: nothing of it is held,
and the lookup does not register it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			ids := make([]client.ChunkID, len(args))
			for i, a := range args {
				var err error
				if ids[i], err = parseID(fmt.Sprintf("id %d", i+1), a); err != nil {
					return err
				}
			}
			c, err := df.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := df.callCtx(cmd.Context())
			defer cancel()
			res, err := c.Lookup(ctx, ids, 0)
			if err != nil {
				return fmt.Errorf("cannot look up at %s: %w", df.addr, err)
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Held          int    `json:"held"`
					Asked         int    `json:"asked"`
					Epoch         uint64 `json:"epoch"`
					NotRegistered bool   `json:"not_registered,omitempty"`
				}{res.Held, len(ids), res.Epoch, res.NotRegistered})
			}
			if res.NotRegistered {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "0 of %d leading ids held: namespace %q is not registered (nothing was written to it)\n",
					len(ids), df.namespace)
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d of %d leading ids held (ring epoch %d)\n", res.Held, len(ids), res.Epoch)
			return err
		},
	}
	df.register(cmd.Flags())
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"held": N, "asked": M, "epoch": E}, with "not_registered": true for an unknown namespace`)
	annotateEnv(cmd.Flags())
	return cmd
}

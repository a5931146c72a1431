package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/client"
)

func newGetCmd() *cobra.Command {
	var (
		df    dataFlags
		idHex string
		out   string
	)
	cmd := &cobra.Command{
		Use:   "get --namespace NS --id HEX [-o FILE]",
		Short: "Read one chunk",
		Long: `Read chunk --id of namespace --namespace and write its bytes (checksum verified)
to stdout, or to FILE with -o. Exits non-zero on a miss, with the reason; FILE is
then left untouched. A read of a namespace nothing was written to is a miss
saying so; it does not register the namespace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			if idHex == "" {
				return fmt.Errorf("--id is required (or %s)", envName("id"))
			}
			id, err := parseID("--id", idHex)
			if err != nil {
				return err
			}
			c, err := df.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := df.callCtx(cmd.Context())
			defer cancel()
			res, err := c.Get(ctx, []client.ChunkID{id})
			if err != nil {
				return fmt.Errorf("cannot get chunk %s at %s: %w", id, df.addr, err)
			}
			r := res[0]
			if !r.Found {
				return fmt.Errorf("chunk %s not found in namespace %s: %s", id, df.namespace, r.Reason)
			}
			if out == "" || out == "-" {
				_, err := cmd.OutOrStdout().Write(r.Data)
				return err
			}
			if err := writeFileAtomic(out, r.Data); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d bytes of chunk %s from %s to %s\n", len(r.Data), id, r.Holder.ID, out)
			return nil
		},
	}
	df.register(cmd.Flags())
	cmd.Flags().StringVar(&idHex, "id", "", "chunk id, 64 hex characters (required)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the chunk to this file instead of stdout")
	annotateEnv(cmd.Flags())
	return cmd
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it, so path is either untouched or complete.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("cannot write output: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cannot write output %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cannot write output %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cannot write output: %w", err)
	}
	return nil
}

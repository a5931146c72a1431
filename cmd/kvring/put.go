package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/client"
)

func newPutCmd() *cobra.Command {
	var (
		df    dataFlags
		idHex string
	)
	cmd := &cobra.Command{
		Use:   "put --namespace NS [--id HEX] FILE",
		Short: "Store a file as one chunk and print the nodes that hold it",
		Long: `Store FILE ("-" for stdin) as one chunk of namespace --namespace, with a
two-phase confirmed write, and print the nodes that hold it now. The chunk id is
--id, or the SHA-256 of the file. The namespace is registered with the schema
flags if it does not exist; if it exists with another schema the error names
the fields that differ.

Exits non-zero when no node holds the chunk (rejected or failed), with the reason.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			data, err := readInput(args[0])
			if err != nil {
				return err
			}
			id := client.ChunkID(sha256.Sum256(data))
			if idHex != "" {
				if id, err = parseID("--id", idHex); err != nil {
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
			res, err := c.Put(ctx, []client.Chunk{{ID: id, Data: data}})
			if err != nil {
				return fmt.Errorf("cannot put chunk %s at %s: %w", id, df.addr, err)
			}
			r := res[0]
			if !r.Status.Held() {
				return fmt.Errorf("chunk %s is not stored: %s: %s", id, r.Status, r.Reason)
			}
			return printPut(cmd.OutOrStdout(), df.namespace, len(data), r)
		},
	}
	df.register(cmd.Flags())
	cmd.Flags().StringVar(&idHex, "id", "", "chunk id, 64 hex characters (default: the SHA-256 of the file)")
	annotateEnv(cmd.Flags())
	return cmd
}

func printPut(w io.Writer, namespace string, size int, r client.PutResult) error {
	what := "stored"
	if r.Status == client.AlreadyHeld {
		what = "already held"
	}
	fmt.Fprintf(w, "%s %s (%d bytes) in namespace %s, held by %d node(s)", what, r.ID, size, namespace, len(r.Holders))
	if r.Degraded {
		fmt.Fprint(w, "; degraded: fewer holders than the replication factor")
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "HOLDER\tGRPC")
	for _, h := range r.Holders {
		fmt.Fprintf(tw, "%s\t%s\n", h.ID, h.Addr)
	}
	return tw.Flush()
}

// readInput reads a file, or stdin for "-".
func readInput(path string) ([]byte, error) {
	if path == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("cannot read stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read chunk file: %w", err)
	}
	return b, nil
}

package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/internal/buildinfo"
)

// buildInfo is this binary's version, commit and commit time.
func buildInfo() buildinfo.Info {
	return buildinfo.Read(buildinfo.Stamp{Version: version, Commit: commit, CommitTime: commitTime, Modified: modified})
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, commit and commit time",
		Long: `Print the version of this kvring binary, the commit it was built from, that
commit's time, whether the tree had uncommitted changes, and the Go toolchain.
A binary built by "go run" or "go test", or with -buildvcs=false, carries no
commit: its version ends in "+devel" and the commit is "unknown". A running
node reports the same in GET /v1/version, "kvring members" and INFO server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildInfo()
			if !asJSON {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info.String())
				return err
			}
			b, err := json.MarshalIndent(info, "", "  ")
			if err != nil {
				return fmt.Errorf("cannot encode the version: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, commit, commit_time, modified, go_version")
	annotateEnv(cmd.Flags())
	return cmd
}

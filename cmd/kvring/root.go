package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kvring",
		Short:         "kvring: a distributed KV-cache cluster for LLM inference",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildInfo().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().String(configFlag, "", "YAML file of flag values (memory-limit: 4GiB, join: [a, b]); flags and KVRING_* variables win over it")
	annotateEnv(root.PersistentFlags())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newServeCmd(), newMembersCmd(), newRingCmd(), newStatsCmd(), newPutCmd(), newGetCmd(), newLookupCmd(), newBenchCmd(), newShmCmd(),
		newDrainCmd(true), newDrainCmd(false), newHandoffCmd(), newNamespacesCmd(), newDropNamespaceCmd(), newEvictCmd(), newForgetCmd(), newLocateCmd(), newVersionCmd())
	return root
}

// envPrefix prefixes every environment variable that sets a flag:
// --memory-limit is KVRING_MEMORY_LIMIT.
const envPrefix = "KVRING_"

// envName is the environment variable for a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag the command line did not set from its KVRING_*
// environment variable, so flags take precedence over the environment. It
// also names the variable in each flag's help.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("environment variable %s=%q: %w", envName(f.Name), v, serr)
		}
	})
	return err
}

// annotateEnv appends the environment variable to every flag's usage.
func annotateEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [$" + envName(f.Name) + "]"
	})
}

// Command kvring is the one kvring binary: `kvring serve` runs a node; the
// other subcommands operate and debug a cluster.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kvring:", oneLine(err.Error()))
		os.Exit(1)
	}
}

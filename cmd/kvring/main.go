// Command kvring is the one kvring binary: `kvring serve` runs a node; the
// other subcommands operate and debug a cluster.
package main

import (
	"fmt"
	"os"
)

// The build's stamp, set by the linker (make build sets them from git):
// go build -ldflags "-X main.version=v0.4.0 -X main.commit=$(git rev-parse HEAD)
// -X main.commitTime=2026-01-02T03:04:05Z -X main.modified=false". Empty when
// not given: then buildinfo.Release and what the Go toolchain stamped name
// the build (see buildinfo.Stamp). These are the only variables the linker
// sets; read them only through buildInfo.
var version, commit, commitTime, modified string

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kvring:", oneLine(err.Error()))
		os.Exit(1)
	}
}

package main

import (
	"github.com/spf13/pflag"

	"github.com/kvring/kvring/node"
)

// registerServeLimits adds the connection caps, bound to c's fields; 0
// takes the node's default (worked out from the descriptor limit).
func registerServeLimits(fs *pflag.FlagSet, c *node.ConnLimitsConfig) {
	fs.IntVar(&c.GRPCMaxConns, "grpc-max-conns", c.GRPCMaxConns,
		"most gRPC connections open at once; more are closed as soon as accepted (0: half the descriptor limit, at most 16384; negative: no cap)")
	fs.IntVar(&c.GRPCMaxConnsPerAddr, "grpc-max-conns-per-addr", c.GRPCMaxConnsPerAddr,
		"most gRPC connections open at once from one IP address (0: 1024; negative: no cap)")
}

package main

import (
	"github.com/spf13/pflag"

	"github.com/kvring/kvring/node"
)

// limitsFlags are serve's connection caps (issue 29), bound to the node's
// ConnLimitsConfig; 0 takes the node's default.
type limitsFlags struct {
	conns node.ConnLimitsConfig
}

func registerServeLimits(fs *pflag.FlagSet, f *limitsFlags) {
	fs.IntVar(&f.conns.GRPCMaxConns, "grpc-max-conns", 0,
		"most gRPC connections open at once; more are closed as soon as accepted (0: half the descriptor limit, at most 16384; negative: no cap)")
	fs.IntVar(&f.conns.GRPCMaxConnsPerAddr, "grpc-max-conns-per-addr", 0,
		"most gRPC connections open at once from one IP address (0: 1024; negative: no cap)")
}

// apply sets the caps in cfg.
func (f *limitsFlags) apply(cfg *node.Config) { cfg.Conns = f.conns }

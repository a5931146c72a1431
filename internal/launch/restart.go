package launch

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// retryEvery is the pause between two tries of a restart that found a
// port taken.
const retryEvery = 50 * time.Millisecond

// Restart starts the stopped node again on its directories and addresses
// (gRPC, gossip, admin and, if it served one, Redis), with args as its
// extra flags instead of the old ones (pass Config().Args to keep them),
// and waits until it is ready. The node's TCP ports stay held while the
// new process starts; its UDP gossip port is released just before. A start
// that fails because a port is taken (someone took it in the instant after
// the exit) is tried again until ReadyTimeout. It returns the new Node;
// this one stays as the record of the process that ended. Fails if the
// process still runs.
func (n *Node) Restart(ctx context.Context, args []string) (*Node, error) {
	return n.RestartAs(ctx, n.cfg.Binary, args)
}

// RestartAs is Restart with another kvring binary: a rolling upgrade's (or
// downgrade's) step.
func (n *Node) RestartAs(ctx context.Context, binary string, args []string) (*Node, error) {
	select {
	case <-n.done:
	default:
		return nil, fmt.Errorf("cannot restart %s: it still runs (pid %d)", n.cfg.Name, n.Pid())
	}
	n.HoldPorts()
	cfg := n.cfg
	cfg.Binary = binary
	cfg.Args = append([]string(nil), args...)
	cfg.GRPCAddr, cfg.GossipAddr, cfg.AdminAddr = n.GRPC, n.Gossip, n.Admin
	if n.RESP != "" {
		cfg.RESPAddr = n.RESP
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	n.held.releaseUDP()
	defer n.held.release()
	for {
		again, err := spawn(cfg, n.held)
		if err != nil {
			return nil, err
		}
		err = again.awaitReady(ctx)
		if err == nil {
			return again, nil
		}
		again.Process.Kill()
		if !errors.Is(err, ErrPortTaken) || ctx.Err() != nil {
			return nil, fmt.Errorf("cannot restart %s: %w", cfg.Name, err)
		}
		cfg.Logf("restart of %s found a port taken; trying again: %v", cfg.Name, err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot restart %s: %w", cfg.Name, err)
		case <-time.After(retryEvery):
		}
	}
}

package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
)

// Resolver looks up the IP addresses of a host name. *net.Resolver implements it; tests pass a fake so that
// a seed name can stand for addresses the test chose. It must be safe for concurrent use.
type Resolver interface {
	// LookupNetIP returns the addresses of host; network is "ip" (both families).
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// seedAddrs resolves every seed into gossip addresses: an IP literal stands for itself, a host name for every
// address it resolves to (a Kubernetes headless Service's name resolves to one A record per pod), and a seed
// without a port uses this node's gossip port. Names are resolved again on every call, so pods that appeared
// or changed address since the last join are found. The addresses come back sorted without duplicates; err
// joins the seeds that could not be resolved (the others are still returned).
func (m *Membership) seedAddrs(ctx context.Context) ([]netip.AddrPort, error) {
	var (
		out  []netip.AddrPort
		errs []error
	)
	for _, s := range m.cfg.Join {
		addrs, err := m.resolveSeed(ctx, s)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, addrs...)
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out), errors.Join(errs...)
}

// resolveSeed returns the addresses of a seed ("host:port", or "host" for this node's gossip port).
func (m *Membership) resolveSeed(ctx context.Context, seed string) ([]netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(seed)
	port := uint64(m.bindPort)
	if err != nil {
		host = seed
	} else if port, err = strconv.ParseUint(portStr, 10, 16); err != nil {
		return nil, fmt.Errorf("seed %q: bad port %q", seed, portStr)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(port))}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timing.TCPTimeout)
	defer cancel()
	ips, err := m.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, fmt.Errorf("cannot resolve seed %q: %w", seed, err)
	}
	out := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		out[i] = netip.AddrPortFrom(ip.Unmap(), uint16(port))
	}
	return out, nil
}

// seedsToJoin returns the seed addresses that are not an alive member's gossip address, as "ip:port"
// strings for memberlist.Join, and the resolution error of seedAddrs. It reads the member table, not
// memberlist.Members, whose Nodes memberlist keeps rewriting.
func (m *Membership) seedsToJoin(ctx context.Context) ([]string, error) {
	alive := make(map[netip.AddrPort]bool)
	for _, mi := range m.rs.members() {
		if ap, err := netip.ParseAddrPort(mi.GossipAddr); err == nil && mi.Liveness == Alive {
			alive[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
		}
	}
	addrs, err := m.seedAddrs(ctx)
	var missing []string
	for _, a := range addrs {
		if !alive[a] {
			missing = append(missing, a.String())
		}
	}
	return missing, err
}

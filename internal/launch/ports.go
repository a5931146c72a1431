package launch

import (
	"net"
	"net/netip"
	"slices"
	"strings"
)

// pickPorts replaces each address of cfg whose port is 0 with a loopback
// port held for the node (HoldPort) and returns the holds, which the
// caller releases once the node listens. The node binds a held port
// explicitly (Go's listeners set SO_REUSEADDR), while nobody else gets it:
// neither a bind to port 0 nor an outgoing connection. The gossip port is
// UDP as well, which a hold cannot keep: it is only checked free, and a
// node that finds it taken after all exits with "address already in use",
// which StartNode tries again on other ports. Addresses of another form
// (a fixed port, a host name) are left as they are.
func pickPorts(cfg *NodeConfig) (*portHolds, error) {
	h := &portHolds{}
	addrs := []*string{&cfg.GRPCAddr, &cfg.GossipAddr, &cfg.AdminAddr}
	if cfg.RESP {
		addrs = append(addrs, &cfg.RESPAddr)
	}
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(*a)
		if err != nil || ap.Port() != 0 || !ap.Addr().Is4() {
			continue
		}
		for {
			p, err := HoldPort(*a)
			if err != nil {
				h.release()
				return nil, err
			}
			if a != &cfg.GossipAddr || udpFree(p.Addr()) {
				h.tcp = append(h.tcp, p)
				*a = p.Addr()
				break
			}
			p.Close()
		}
	}
	return h, nil
}

// udpFree reports whether addr's UDP port can be bound now.
func udpFree(addr string) bool {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// quietLogs reports whether the node's log level (its last --log-level
// flag, else KVRING_LOG_LEVEL) hides the "node ready" line, an info line.
func quietLogs(cfg NodeConfig) bool {
	level := ""
	for _, kv := range slices.Concat(cfg.env(nil), cfg.Env) {
		if v, ok := strings.CutPrefix(kv, "KVRING_LOG_LEVEL="); ok {
			level = v
		}
	}
	for i, a := range cfg.Args {
		if v, ok := strings.CutPrefix(a, "--log-level="); ok {
			level = v
		} else if a == "--log-level" && i+1 < len(cfg.Args) {
			level = cfg.Args[i+1]
		}
	}
	return level == "warn" || level == "error"
}

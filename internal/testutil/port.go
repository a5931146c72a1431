package testutil

import "github.com/kvring/kvring/internal/launch"

// PortHold is a TCP port kept bound by a socket that does not listen
// (launch.PortHold, which says what that guarantees).
type PortHold = launch.PortHold

// HoldPort binds a TCP socket to addr ("127.0.0.1:0" picks a free port;
// IPv4 only) and keeps it bound until Close (launch.HoldPort).
func HoldPort(addr string) (*PortHold, error) { return launch.HoldPort(addr) }

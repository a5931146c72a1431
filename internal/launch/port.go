package launch

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// PortHold is a TCP port kept bound by a socket that does not listen. It
// exists so that a test can choose a port for a process it starts, or keep
// a stopped process's port for its restart, without another test taking the
// port in between: the race of picking a free port, closing it and handing
// its number on.
//
// The socket is bound with SO_REUSEADDR. On Linux, while it is held:
//   - no bind to port 0 and no outgoing connection is given the port, so
//     another test's listener or client cannot take it;
//   - a connection to it is refused, as to a port nobody holds;
//   - a process may still listen on it explicitly, if it sets SO_REUSEADDR
//     as Go's net package (so gRPC and memberlist's TCP side) and
//     redis-server do.
//
// UDP has no such rule: a UDP port must be released before its owner binds
// it again. Close is idempotent; PortHold is safe for concurrent use.
type PortHold struct {
	addr string
	port int
	once sync.Once
	fd   int
}

// HoldPort binds a TCP socket to addr ("127.0.0.1:0" picks a free port;
// IPv4 only) and keeps it bound until Close. It fails when another socket
// holds or listens on the port.
func HoldPort(addr string) (*PortHold, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("cannot hold port of %q: want an IPv4 host:port", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot hold port of %q: %w", addr, err)
	}
	h, err := bindHold(fd, ap)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("cannot hold port of %q: %w", addr, err)
	}
	return h, nil
}

func bindHold(fd int, ap netip.AddrPort) (*PortHold, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	port := sa.(*unix.SockaddrInet4).Port
	return &PortHold{addr: net.JoinHostPort(ap.Addr().String(), strconv.Itoa(port)), port: port, fd: fd}, nil
}

// Addr is the held address, host:port, with the port the kernel chose.
func (h *PortHold) Addr() string { return h.addr }

// Port is the held port.
func (h *PortHold) Port() int { return h.port }

// Close releases the port.
func (h *PortHold) Close() error {
	var err error
	h.once.Do(func() { err = unix.Close(h.fd) })
	return err
}

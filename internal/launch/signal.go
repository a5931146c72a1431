package launch

import (
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Stop sends SIGTERM and waits for the exit; after StopTimeout it sends
// SIGKILL and returns an error saying so. It also returns an error when
// the process exits with another code than 0. Once it has exited, the
// node's ports are held until Restart or Close. Blocks until the exit.
func (n *Node) Stop() error {
	err := n.Process.Stop(n.cfg.StopTimeout)
	n.HoldPorts()
	return err
}

// Kill sends SIGKILL, waits for the exit and holds the node's ports until
// Restart or Close.
func (n *Node) Kill() {
	n.Process.Kill()
	n.HoldPorts()
}

// pauseTimeout bounds Pause's wait for the process to stop.
const pauseTimeout = 10 * time.Second

// Pause stops the process with SIGSTOP and waits until the kernel shows it
// stopped: it holds its ports and answers nothing until Continue.
func (n *Node) Pause() error {
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	for deadline := time.Now().Add(pauseTimeout); processState(n.Pid()) != 'T'; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) did not stop within %v of SIGSTOP", n.cfg.Name, n.Pid(), pauseTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// Continue resumes a paused process (SIGCONT).
func (n *Node) Continue() error { return n.Signal(syscall.SIGCONT) }

// portHolds are the sockets keeping a stopped node's ports. Safe for
// concurrent use.
type portHolds struct {
	mu  sync.Mutex
	tcp []io.Closer // gRPC, admin, gossip, RESP: may stay while the node listens again
	udp []io.Closer // gossip: must go before the node binds it again
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		c.Close()
	}
}

func (h *portHolds) releaseUDP() {
	h.mu.Lock()
	defer h.mu.Unlock()
	closeAll(h.udp)
	h.udp = nil
}

func (h *portHolds) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	closeAll(h.tcp)
	closeAll(h.udp)
	h.tcp, h.udp = nil, nil
}

// HoldPorts holds the TCP ports and the UDP gossip port of the node, which
// has exited (by a signal the caller sent, say), until Restart or Close;
// Stop and Kill do it themselves. It does nothing while the process runs
// or when its ports are held already. Best effort: a port another process took in the instant
// after the exit, or one the launcher cannot bind (another network
// namespace's address), is reported to Logf and left.
func (n *Node) HoldPorts() {
	select {
	case <-n.done:
	default:
		return
	}
	n.held.mu.Lock()
	defer n.held.mu.Unlock()
	if len(n.held.tcp)+len(n.held.udp) > 0 {
		return
	}
	for _, addr := range []string{n.GRPC, n.Admin, n.Gossip, n.RESP} {
		if addr == "" {
			continue
		}
		h, err := HoldPort(addr)
		if err != nil {
			n.cfg.Logf("%s (%s) stopped, but its port cannot be held: %v", n.cfg.Name, n.ID, err)
			continue
		}
		n.held.tcp = append(n.held.tcp, h)
	}
	if n.Gossip == "" {
		return
	}
	if pc, err := net.ListenPacket("udp", n.Gossip); err != nil {
		n.cfg.Logf("%s (%s) stopped, but its UDP gossip port cannot be held: %v", n.cfg.Name, n.ID, err)
	} else {
		n.held.udp = append(n.held.udp, pc)
	}
}

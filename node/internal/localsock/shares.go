package localsock

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/fairshare"
)

// unsealedShares is the budget of unsealed blobs (Config.MaxUnsealedBytes)
// shared among the socket's clients (package fairshare): a client alone may
// hold most of it, and a second one always finds room. A client is a
// process (its pid, from the socket's peer credentials), so opening more
// connections gains it nothing. Guarded by table.mu.
type unsealedShares struct {
	pool  *fairshare.Pool // nil: no budget
	bytes int64           // unsealed bytes held in all
}

func newUnsealedShares(total int64) unsealedShares {
	if total <= 0 {
		return unsealedShares{}
	}
	return unsealedShares{pool: fairshare.NewPool(total)}
}

// take charges an unsealed blob of size bytes to client, or refuses it with
// a not-enough-memory error naming the client's share. mu held.
func (u *unsealedShares) take(client string, size int64) error {
	if u.pool != nil {
		err := u.pool.Take(client, size)
		switch {
		case errors.Is(err, fairshare.ErrFull):
			return errorf(codeNotEnoughMemory, "cannot create a blob of %d bytes: unsealed blobs hold %d bytes, at most %d may at once",
				size, u.bytes, u.pool.Total())
		case err != nil:
			return errorf(codeNotEnoughMemory, "cannot create a blob of %d bytes: %v of the unsealed-blob budget", size, err)
		}
	}
	u.bytes += size
	return nil
}

// give returns what take charged. mu held.
func (u *unsealedShares) give(client string, size int64) {
	u.bytes -= size
	if u.pool != nil {
		u.pool.Give(client, size)
	}
}

// clientOf names the process at the other end of nc ("pid:N"), or the
// connection when the kernel does not say (seq is the connection's number).
func clientOf(nc *net.UnixConn, seq uint64) string {
	raw, err := nc.SyscallConn()
	if err == nil {
		var cred *unix.Ucred
		var cerr error
		err = raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
		if err == nil && cerr == nil && cred != nil && cred.Pid > 0 {
			return fmt.Sprintf("pid:%d", cred.Pid)
		}
	}
	return fmt.Sprintf("socket-conn:%d", seq)
}

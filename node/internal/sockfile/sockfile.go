// Package sockfile creates the Unix socket files a node serves on (the
// local socket, the Redis-protocol socket): a stale file left by a killed
// process is replaced, a live one or a file that is not a socket is an
// error, and the file has the mode asked for.
package sockfile

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// Listen creates the socket file at path with mode and listens on it. An
// existing socket file that nobody answers on (left by a killed process)
// is removed first; one that answers is an error naming the path, and so
// is a file that is not a socket (it is never removed). The listener
// removes the file when it is closed. It blocks for at most a second
// (the dial that asks whether the socket is live).
func Listen(path string, mode os.FileMode) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("cannot listen on %q: the file exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("cannot listen on %q: another process is serving on it", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("cannot tell whether socket %q is in use: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("cannot remove the stale socket %q: %w", path, err)
		}
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %q: %w", path, err)
	}
	lis.SetUnlinkOnClose(true)
	if err := os.Chmod(path, mode); err != nil {
		lis.Close()
		return nil, fmt.Errorf("cannot set mode %v on socket %q: %w", mode, path, err)
	}
	return lis, nil
}

package localsock

import (
	"net"
	"os"

	"github.com/kvring/kvring/node/internal/sockfile"
)

// listen creates the socket file at path with mode (sockfile.Listen: a
// stale file is replaced, a live one or a file that is not a socket is an
// error). The listener removes the file when it is closed.
func listen(path string, mode os.FileMode) (*net.UnixListener, error) {
	return sockfile.Listen(path, mode)
}

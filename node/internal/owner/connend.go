package owner

import "net"

// ConnClosed frees, when the Peer connection from remote ends, the chunks
// its caller staged and did not commit (AbortCaller). The node's gRPC
// listener calls it once per connection it closes
// (node/internal/services/connwatch.go). It never blocks for long; safe for
// concurrent use.
func (o *Owner) ConnClosed(remote net.Addr) {
	if remote == nil {
		return
	}
	o.AbortCaller(callerAt(remote))
}

package node

import (
	"fmt"
	"math"
	"time"

	"github.com/kvring/kvring/transfer"
)

// peerPingInterval is how often a node pings an idle peer connection
// (node/internal/coord/peers.go); KeepaliveMinTime may not exceed it, or
// nodes would disconnect each other for pinging too often.
const peerPingInterval = 10 * time.Second

// pprofDefaultProfile is the duration of /debug/pprof/profile without
// ?seconds=; AdminWriteTimeout must exceed it when pprof is served.
const pprofDefaultProfile = 30 * time.Second

// bytesPerChunkRef bounds the encoding of one ChunkRef (a 32-byte id, a
// size, a CRC and their tags) or chunk id in a call's message.
const bytesPerChunkRef = 64

// minRecvMsgBytes is the smallest MaxRecvMsgBytes that carries a data frame
// and a call naming maxBatch chunks, with room for the message's other
// fields.
func minRecvMsgBytes(maxBatch int) int {
	return max(transfer.MaxFrameBytes, maxBatch*bytesPerChunkRef) + 64<<10
}

// checkLimits checks the connection limits of a Config whose defaults are
// filled in.
func (c *Config) checkLimits() []error {
	var errs []error
	if c.MaxStreamsPerConn < 1 || int64(c.MaxStreamsPerConn) > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("max streams per connection must be in [1, %d], got %d", uint32(math.MaxUint32), c.MaxStreamsPerConn))
	}
	if want := minRecvMsgBytes(c.MaxBatchChunks); c.MaxRecvMsgBytes < want {
		errs = append(errs, fmt.Errorf("max receive message size must be at least %d bytes, to hold a 1 MiB data frame and a call of max-batch=%d chunks; got %d",
			want, c.MaxBatchChunks, c.MaxRecvMsgBytes))
	}
	if c.KeepaliveMinTime < 0 || c.KeepaliveMinTime > peerPingInterval {
		errs = append(errs, fmt.Errorf("keepalive min time must be in (0, %s] (nodes ping idle peers every %s), got %s",
			peerPingInterval, peerPingInterval, c.KeepaliveMinTime))
	}
	if c.KeepaliveTime < time.Second {
		errs = append(errs, fmt.Errorf("keepalive time must be at least 1s, got %s", c.KeepaliveTime))
	}
	if c.KeepaliveTimeout < 0 {
		errs = append(errs, fmt.Errorf("keepalive timeout must be positive, got %s", c.KeepaliveTimeout))
	}
	if c.AdminIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("admin idle timeout must be positive, got %s", c.AdminIdleTimeout))
	}
	if c.MaxConnAgeGrace < 0 {
		errs = append(errs, fmt.Errorf("max connection age grace must be positive, got %s", c.MaxConnAgeGrace))
	}
	if c.AdminMaxHeaderBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("admin max header size must be at least 4096 bytes, got %d", c.AdminMaxHeaderBytes))
	}
	if c.EnablePprof && c.AdminWriteTimeout > 0 && c.AdminWriteTimeout <= pprofDefaultProfile {
		errs = append(errs, fmt.Errorf("admin write timeout %s is too short for pprof's default %s CPU profile: make it longer, or negative for none",
			c.AdminWriteTimeout, pprofDefaultProfile))
	}
	return errs
}

// orNone is d for a limit whose negative value means none: 0 (no limit) for
// a negative d.
func orNone(d time.Duration) time.Duration { return max(d, 0) }

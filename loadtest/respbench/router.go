package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// slotCount is Redis Cluster's number of hash slots.
const slotCount = 16384

// router says which server answers a key: the one -addr names, or with
// -cluster the node serving the key's slot. It is shared by all workers.
type router struct {
	seed    string
	cluster bool
	mu      sync.Mutex
	slots   [slotCount]string
}

// newRouter reads the slot table (CLUSTER SHARDS) from seed when cluster is set.
func newRouter(ctx context.Context, seed string, cluster bool) (*router, error) {
	r := &router{seed: seed, cluster: cluster}
	if !cluster {
		return r, nil
	}
	c := redis.NewClient(&redis.Options{Addr: seed, MaxRetries: -1})
	defer c.Close()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS from %s: %w", seed, err)
	}
	for _, sh := range shards {
		if err := r.assign(sh); err != nil {
			return nil, fmt.Errorf("CLUSTER SHARDS from %s: %w", seed, err)
		}
	}
	for i, a := range r.slots {
		if a == "" {
			return nil, fmt.Errorf("CLUSTER SHARDS from %s: slot %d has no node", seed, i)
		}
	}
	return r, nil
}

// assign gives a shard's slots to its primary (the node whose role is
// master).
func (r *router) assign(sh redis.ClusterShard) error {
	addr := ""
	for _, n := range sh.Nodes {
		if n.Role == "master" {
			addr = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
		}
	}
	if addr == "" {
		return fmt.Errorf("a shard without a primary: %+v", sh.Nodes)
	}
	for _, s := range sh.Slots {
		if s.Start < 0 || s.End >= slotCount || s.Start > s.End {
			return fmt.Errorf("bad slot range %d-%d", s.Start, s.End)
		}
		for i := s.Start; i <= s.End; i++ {
			r.slots[i] = addr
		}
	}
	return nil
}

// addr is the server to send key to.
func (r *router) addr(key string) string {
	if !r.cluster {
		return r.seed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slots[keySlot(key)]
}

// moved records a -MOVED answer ("slot host:port") and returns its target.
func (r *router) moved(msg string) (string, error) {
	slot, addr, ok := strings.Cut(msg, " ")
	n, err := strconv.Atoi(slot)
	if !ok || err != nil || n < 0 || n >= slotCount || addr == "" {
		return "", fmt.Errorf("malformed MOVED %q", msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slots[n] = addr
	return addr, nil
}

// keySlot is Redis Cluster's slot of key: CRC-16/XMODEM of the key, or of
// its hash tag (the bytes between the first { and the next }, when not
// empty), modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}

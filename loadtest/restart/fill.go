package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// quiet is a go-redis logger that drops its lines: a node that is starting
// refuses connections, and firstHit retries them by design.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// key is the i'th value's key, in LMCache's current layout (one namespace).
func key(i int) string {
	return fmt.Sprintf("restart/model@1@0@%x@bfloat16kv_bytes", i)
}

// value is the i'th value's bytes: its index at both ends around a fixed
// pattern, so that a value read under another key's name is caught.
func value(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(j*7 + j>>8)
	}
	var idx [8]byte
	binary.LittleEndian.PutUint64(idx[:], uint64(i))
	copy(b, idx[:])
	copy(b[max(size-8, 0):], idx[:])
	return b
}

// client is a go-redis client for addr with room for o.conns connections.
func client(addr string, o options) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: o.conns, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, MaxRetries: -1})
}

// eachBatch calls f with batches of up to o.pipe consecutive indexes below
// o.chunks from o.conns goroutines, and returns the first error.
func eachBatch(o options, f func(lo, hi int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range o.conns {
		wg.Go(func() {
			for {
				mu.Lock()
				lo := next
				next = min(next+o.pipe, o.chunks)
				stop := lo >= o.chunks || first != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := f(lo, min(lo+o.pipe, o.chunks)); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// fill SETs every value through addr, pipelined; any SET that is not +OK
// is an error.
func fill(ctx context.Context, addr string, o options) error {
	c := client(addr, o)
	defer c.Close()
	return eachBatch(o, func(lo, hi int) error {
		p := c.Pipeline()
		for i := lo; i < hi; i++ {
			p.Set(ctx, key(i), value(i, o.size), 0)
		}
		_, err := p.Exec(ctx)
		if err != nil {
			return fmt.Errorf("fill: SET of values %d..%d: %w", lo, hi-1, err)
		}
		return nil
	})
}

// firstHit GETs value 0 until it returns its bytes, and returns the time
// since started. Refused connections and errors while the node starts are
// retried; other bytes are an error.
func firstHit(ctx context.Context, addr string, o options, started time.Time) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	want := value(0, o.size)
	for time.Since(started) < 10*time.Minute {
		got, err := c.Get(ctx, key(0)).Bytes()
		switch {
		case err == nil && bytes.Equal(got, want):
			return time.Since(started), nil
		case err == nil:
			return 0, fmt.Errorf("first GET after start: %d other bytes", len(got))
		case ctx.Err() != nil:
			return 0, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, errors.New("no hit within 10 minutes of start")
}

// readBack GETs every value, pipelined, and returns how many read back
// byte-exact; a value read back with other bytes is an error (nil is a
// value not kept).
func readBack(ctx context.Context, addr string, o options) (int, error) {
	c := client(addr, o)
	defer c.Close()
	var mu sync.Mutex
	var kept int
	err := eachBatch(o, func(lo, hi int) error {
		p := c.Pipeline()
		cmds := make([]*redis.StringCmd, 0, hi-lo)
		for i := lo; i < hi; i++ {
			cmds = append(cmds, p.Get(ctx, key(i)))
		}
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read back values %d..%d: %w", lo, hi-1, err)
		}
		n := 0
		for j, cmd := range cmds {
			got, err := cmd.Bytes()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil || !bytes.Equal(got, value(lo+j, o.size)) {
				return fmt.Errorf("value %d read back as %d other bytes (%v)", lo+j, len(got), err)
			}
			n++
		}
		mu.Lock()
		kept += n
		mu.Unlock()
		return nil
	})
	return kept, err
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// load is one run: its writers, readers and counts.
type load struct {
	o      options
	c      redis.UniversalClient
	nonce  uint64 // keeps one run's keys apart from an earlier run's
	chunks int64

	next atomic.Int64 // the next chunk a writer takes
	high atomic.Int64 // 1 + the highest chunk written whole

	writes, writeErrs                     atomic.Int64
	exists, exists1, existsErrs           atomic.Int64
	nilAny, nilKV, nilMeta, wrong, getErr atomic.Int64

	mu       sync.Mutex
	firstErr string // the first write or read error, for the report
}

func newLoad(o options, c redis.UniversalClient) *load {
	return &load{o: o, c: c, nonce: rand.Uint64(), chunks: o.workingSet / int64(o.size)}
}

// stem is chunk i's LMCache chunk key.
func (l *load) stem(i int64) string {
	h := sha256.Sum256(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, l.nonce), uint64(i)))
	return fmt.Sprintf("existslease/model@1@0@%x@bfloat16", h[:8])
}

// value fills buf with chunk i's kv_bytes: its first 16 bytes name the run
// and the chunk, the rest is the same in every chunk.
func (l *load) value(buf []byte, i int64) []byte {
	binary.LittleEndian.PutUint64(buf, l.nonce)
	binary.LittleEndian.PutUint64(buf[8:], uint64(i))
	return buf
}

func (l *load) meta(i int64) []byte { return fmt.Appendf(nil, "meta %016x %06d", l.nonce, i%1000000) }

// noteErr keeps the first error.
func (l *load) noteErr(err error) {
	l.mu.Lock()
	if l.firstErr == "" {
		l.firstErr = err.Error()
	}
	l.mu.Unlock()
}

// run writes the working set with the writers while the readers read, and
// returns the peak of the nodes' pinned bytes (sampled every 250 ms).
func (l *load) run(ctx context.Context, admins []string) scrape {
	wctx, cancel := context.WithTimeout(ctx, l.o.maxTime)
	defer cancel()
	var writers, others sync.WaitGroup
	start := time.Now()
	for range l.o.writers {
		writers.Go(func() { l.write(wctx, start) })
	}
	done := make(chan struct{})
	for r := range l.o.readers {
		others.Go(func() { l.read(ctx, done, rand.New(rand.NewPCG(l.nonce, uint64(r)))) })
	}
	var peak scrape
	if len(admins) > 0 {
		others.Go(func() { peak = sample(admins, done) })
	}
	writers.Wait()
	close(done)
	others.Wait()
	return peak
}

// sample scrapes admins every 250 ms until done and returns the peak of
// their pinned bytes (summed), with their pin limit.
func sample(admins []string, done <-chan struct{}) scrape {
	var peak scrape
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return peak
		case <-t.C:
		}
		if s := scrapeAll(admins); s.pinned >= peak.pinned {
			peak = s
		}
	}
}

// write SETs chunks (kv_bytes, then metadata) until every chunk was taken,
// chunk i not before start + i/-rate.
func (l *load) write(ctx context.Context, start time.Time) {
	buf := bytes.Repeat([]byte("kvring existslease "), l.o.size/19+1)[:l.o.size]
	for ctx.Err() == nil {
		i := l.next.Add(1) - 1
		if i >= l.chunks {
			return
		}
		if l.o.rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / l.o.rate * float64(time.Second)))))
		}
		err := l.c.Set(ctx, l.stem(i)+"kv_bytes", l.value(buf, i), 0).Err()
		if err == nil {
			err = l.c.Set(ctx, l.stem(i)+"metadata", l.meta(i), 0).Err()
		}
		if err != nil {
			l.writeErrs.Add(1)
			l.noteErr(fmt.Errorf("SET chunk %d: %w", i, err))
			continue
		}
		l.writes.Add(1)
		for h := l.high.Load(); h < i+1 && !l.high.CompareAndSwap(h, i+1); h = l.high.Load() {
		}
	}
}

// read asks EXISTS of a recent chunk's metadata and, when it is 1, GETs
// both keys -gap later, until done.
func (l *load) read(ctx context.Context, done <-chan struct{}, rng *rand.Rand) {
	for {
		select {
		case <-done:
			return
		default:
		}
		hi := l.high.Load()
		if hi == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		i := max(0, hi-int64(l.o.window)) + rng.Int64N(min(hi, int64(l.o.window)))
		n, err := l.c.Exists(ctx, l.stem(i)+"metadata").Result()
		l.exists.Add(1)
		if err != nil {
			l.existsErrs.Add(1)
			l.noteErr(fmt.Errorf("EXISTS chunk %d: %w", i, err))
			continue
		}
		if n != 1 {
			continue
		}
		l.exists1.Add(1)
		time.Sleep(l.o.gap)
		l.check(ctx, i)
	}
}

// check GETs chunk i's kv_bytes and metadata and counts what they return.
func (l *load) check(ctx context.Context, i int64) {
	kv, kerr := l.c.Get(ctx, l.stem(i)+"kv_bytes").Bytes()
	meta, merr := l.c.Get(ctx, l.stem(i)+"metadata").Bytes()
	for _, err := range []error{kerr, merr} {
		if err != nil && !errors.Is(err, redis.Nil) {
			l.getErr.Add(1)
			l.noteErr(fmt.Errorf("GET chunk %d: %w", i, err))
			return
		}
	}
	kvNil, metaNil := errors.Is(kerr, redis.Nil), errors.Is(merr, redis.Nil)
	switch {
	case kvNil || metaNil:
		l.nilAny.Add(1)
		if kvNil {
			l.nilKV.Add(1)
		}
		if metaNil {
			l.nilMeta.Add(1)
		}
	case len(kv) != l.o.size || binary.LittleEndian.Uint64(kv) != l.nonce || binary.LittleEndian.Uint64(kv[8:]) != uint64(i) ||
		!bytes.Equal(meta, l.meta(i)):
		l.wrong.Add(1)
	}
}

// report is the run's line.
func (l *load) report(o options, took time.Duration, counts, peak scrape) string {
	e1 := l.exists1.Load()
	rate := 0.0
	if e1 > 0 {
		rate = 100 * float64(l.nilAny.Load()) / float64(e1)
	}
	s := fmt.Sprintf("%s: %d chunks of %d KiB written (%d failed) in %.1fs; EXISTS %d (errors %d), =1 %d; GET after EXISTS=1: nil %d (%.3f%%: kv_bytes %d, metadata %d), other bytes %d, errors %d",
		o.label, l.writes.Load(), o.size>>10, l.writeErrs.Load(), took.Seconds(), l.exists.Load(), l.existsErrs.Load(), e1,
		l.nilAny.Load(), rate, l.nilKV.Load(), l.nilMeta.Load(), l.wrong.Load(), l.getErr.Load())
	if o.admins != "" {
		s += fmt.Sprintf("; evictions %.0f; EXISTS=1 unpinned %.0f; peak pinned %.1f of %.1f MiB", counts.evictions, counts.unpinned,
			peak.pinned/(1<<20), peak.pinLimit/(1<<20))
	}
	if l.firstErr != "" {
		s += "; first error: " + l.firstErr
	}
	return s
}

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// target is one series of runs: a server and the keys asked of it.
type target struct {
	name string
	c    *redis.Client
	keys []string
}

// result is one run: its percentiles and the EXISTS that answered 0.
type result struct {
	p50, p99 time.Duration
	misses   int
}

// warmup is the EXISTS sent before each run's timed ones (connection and
// caches warm).
const warmup = 200

// measure sends n EXISTS to t, one at a time over its keys, and returns
// the percentiles of their round trips.
func measure(ctx context.Context, t target, n int) (result, error) {
	for i := range warmup {
		if err := t.c.Exists(ctx, t.keys[i%len(t.keys)]).Err(); err != nil {
			return result{}, fmt.Errorf("%s: EXISTS: %w", t.name, err)
		}
	}
	lat := make([]time.Duration, n)
	var r result
	for i := range n {
		start := time.Now()
		got, err := t.c.Exists(ctx, t.keys[i%len(t.keys)]).Result()
		lat[i] = time.Since(start)
		if err != nil {
			return result{}, fmt.Errorf("%s: EXISTS %s: %w", t.name, t.keys[i%len(t.keys)], err)
		}
		if got != 1 {
			r.misses++
		}
	}
	slices.Sort(lat)
	r.p50, r.p99 = lat[n/2], lat[min(n-1, n*99/100)]
	return r, nil
}

// median is the middle of ds (the mean of the two middle ones when even).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize prints each target's median p50 and p99 over the rounds and
// their ratios to redis-server's.
func summarize(runs []target, res map[string][]result) {
	med := func(name string, p func(result) time.Duration) time.Duration {
		var ds []time.Duration
		for _, r := range res[name] {
			ds = append(ds, p(r))
		}
		return median(ds)
	}
	p50 := func(r result) time.Duration { return r.p50 }
	p99 := func(r result) time.Duration { return r.p99 }
	r50, r99 := med("redis", p50), med("redis", p99)
	fmt.Printf("%-14s %10s %10s %10s %10s\n", "target", "p50", "p99", "p50 ratio", "p99 ratio")
	for _, t := range runs {
		m50, m99 := med(t.name, p50), med(t.name, p99)
		fmt.Printf("%-14s %10s %10s %9.2fx %9.2fx\n", t.name, m50.Round(time.Microsecond), m99.Round(time.Microsecond),
			float64(m50)/float64(r50), float64(m99)/float64(r99))
	}
}

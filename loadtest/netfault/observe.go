package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// observer reads the nodes' admin API from the control namespace, which no
// partition cuts off.
type observer struct {
	c    *cluster
	http *http.Client
}

func newObserver(c *cluster) *observer {
	return &observer{c: c, http: &http.Client{Timeout: 2 * time.Second}}
}

// view is one node's answer to GET /v1/cluster, reduced.
type view struct {
	self  string
	ring  []string // ids of ring members, sorted
	alive []string // ids of members it sees alive, sorted
}

func (o *observer) getJSON(ctx context.Context, i int, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.c.adminAddr(i)+path, nil)
	if err != nil {
		return err
	}
	resp, err := o.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on node %d: %s", path, i, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (o *observer) view(ctx context.Context, i int) (view, error) {
	var info struct {
		NodeID  string `json:"node_id"`
		Members []struct {
			ID         string `json:"id"`
			Liveness   string `json:"liveness"`
			RingMember bool   `json:"ring_member"`
		} `json:"members"`
	}
	if err := o.getJSON(ctx, i, "/v1/cluster", &info); err != nil {
		return view{}, err
	}
	v := view{self: info.NodeID}
	for _, m := range info.Members {
		if m.RingMember {
			v.ring = append(v.ring, m.ID)
		}
		if m.Liveness == "alive" {
			v.alive = append(v.alive, m.ID)
		}
	}
	slices.Sort(v.ring)
	slices.Sort(v.alive)
	return v, nil
}

// ids returns every node's id, asking each node (the ids are the store's, made at first start).
func (o *observer) ids(ctx context.Context) ([]string, error) {
	ids := make([]string, o.c.cfg.Nodes)
	for i := range ids {
		v, err := o.view(ctx, i)
		if err != nil {
			return nil, err
		}
		ids[i] = v.self
	}
	return ids, nil
}

// converged reports whether every node answers and every node's ring and
// alive set are exactly all ids.
func (o *observer) converged(ctx context.Context, ids []string) bool {
	want := slices.Sorted(slices.Values(ids))
	for i := range ids {
		v, err := o.view(ctx, i)
		if err != nil || !slices.Equal(v.ring, want) || !slices.Equal(v.alive, want) {
			return false
		}
	}
	return true
}

// waitFor polls cond every 200 ms until it holds or bound passes, and
// returns how long it took and whether it held.
func waitFor(ctx context.Context, bound time.Duration, cond func(context.Context) bool) (time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(bound)
	for {
		if cond(ctx) {
			return time.Since(start), true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(start), false
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // polling interval
		}
	}
}

// dropped reports whether every node in from has taken every id in gone off
// its ring (writes go to substitutes).
func (o *observer) dropped(ctx context.Context, from []int, gone []string) bool {
	for _, i := range from {
		v, err := o.view(ctx, i)
		if err != nil {
			return false
		}
		for _, id := range gone {
			if slices.Contains(v.ring, id) {
				return false
			}
		}
	}
	return true
}

// suspected reports whether any node in from no longer sees a node in gone alive.
func (o *observer) anyDead(ctx context.Context, from []int, ids []string) bool {
	for _, i := range from {
		v, err := o.view(ctx, i)
		if err != nil {
			continue
		}
		for _, id := range ids {
			if !slices.Contains(v.alive, id) {
				return true
			}
		}
	}
	return false
}

// resources is one node's process figures from /metrics.
type resources struct {
	Goroutines float64 `json:"goroutines"`
	FDs        float64 `json:"fds"`
	HeapInuse  float64 `json:"heap_inuse"`
	RSS        float64 `json:"rss"`
}

func (o *observer) resources(ctx context.Context, i int) (resources, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.c.adminAddr(i)+"/metrics", nil)
	if err != nil {
		return resources{}, err
	}
	resp, err := o.http.Do(req)
	if err != nil {
		return resources{}, err
	}
	defer resp.Body.Close()
	var r resources
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			r.Goroutines = f
		case "process_open_fds":
			r.FDs = f
		case "go_memstats_heap_inuse_bytes":
			r.HeapInuse = f
		case "process_resident_memory_bytes":
			r.RSS = f
		}
	}
	return r, sc.Err()
}

// evictions sums the evictions every node reports in GET /v1/stats (a
// restarted node restarts its counters).
func (o *observer) evictions(ctx context.Context) (uint64, error) {
	var total uint64
	for i := range o.c.cfg.Nodes {
		var st struct {
			Evictions map[string]uint64 `json:"evictions"`
		}
		if err := o.getJSON(ctx, i, "/v1/stats", &st); err != nil {
			return total, err
		}
		total += st.Evictions["policy"] // hand-offs remove chunks too ("explicit"): not a loss
	}
	return total, nil
}

// ready reports whether every node answers GET /readyz with 200.
func (o *observer) ready(ctx context.Context) bool {
	for i := range o.c.cfg.Nodes {
		var rd struct {
			Ready bool `json:"ready"`
		}
		if err := o.getJSON(ctx, i, "/readyz", &rd); err != nil || !rd.Ready {
			return false
		}
	}
	return true
}

package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// scrape is what the tool reads from kvring nodes' /metrics, summed over
// the nodes.
type scrape struct {
	evictions float64 // kvring_store_evictions_total{reason="policy"}
	pinned    float64 // kvring_store_pinned_bytes
	pinLimit  float64 // kvring_store_pin_limit_bytes
	unpinned  float64 // kvring_resp_exists_unpinned_total
}

// scrapeAll reads every admin address; a node that does not answer counts
// nothing (the report is then short of it, which its line says nowhere:
// pass only nodes that run).
func scrapeAll(admins []string) scrape {
	var s scrape
	for _, a := range admins {
		m := metricsOf(a)
		s.evictions += m[`kvring_store_evictions_total{reason="policy"}`]
		s.pinned += m["kvring_store_pinned_bytes"]
		s.pinLimit += m["kvring_store_pin_limit_bytes"]
		s.unpinned += m["kvring_resp_exists_unpinned_total"]
	}
	return s
}

// metricsOf returns the unlabelled and labelled samples of admin's
// /metrics by their full name, within 5 s.
func metricsOf(admin string) map[string]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kvring_store_") && !strings.HasPrefix(line, "kvring_resp_exists_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

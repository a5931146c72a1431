package collectors

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/store"
)

// gathered is a registry's series by name{labels}, each label as name="v".
type gathered map[string]float64

func gather(t *testing.T, g prometheus.Gatherer) gathered {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := gathered{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue()
			if c := m.GetCounter(); c != nil {
				v = c.GetValue()
			}
			s[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return s
}

// get returns a series' value; the test fails if it is not exported.
func (s gathered) get(t *testing.T, name string) float64 {
	t.Helper()
	if !strings.Contains(name, "{") {
		name += "{}"
	}
	v, ok := s[name]
	if !ok {
		t.Fatalf("metric %s is not exported", name)
	}
	return v
}

// TestStoreCollectorExportsEveryReason: reasons the store has not counted yet
// are exported as 0, so their series exist before the first event.
func TestStoreCollectorExportsEveryReason(t *testing.T) {
	t.Parallel()
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: t.TempDir(), MemoryLimit: 1 << 20, MaintenanceInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(st))
	s := gather(t, reg)
	for _, r := range evictionReasons {
		if v := s.get(t, fmt.Sprintf("kvring_store_evictions_total{reason=%q}", r)); v != 0 {
			t.Errorf("evictions %s = %v on a new store", r, v)
		}
	}
	for _, r := range rejectionReasons {
		if v := s.get(t, fmt.Sprintf("kvring_store_rejections_total{reason=%q}", r)); v != 0 {
			t.Errorf("rejections %s = %v on a new store", r, v)
		}
	}
	if v := s.get(t, "kvring_store_limit_bytes"); v != 1<<20 {
		t.Errorf("limit = %v", v)
	}
}

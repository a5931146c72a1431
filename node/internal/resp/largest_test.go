package resp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAValueOverTheLargestIsReadPastAndRefused: a SET whose value is over
// the node's largest chunk (but under Redis's 512 MB bulk limit) gets an
// error that names the limit and the setting, and the connection goes on
// serving; a bulk length past 512 MB is a protocol error and closes it.
func TestAValueOverTheLargestIsReadPastAndRefused(t *testing.T) {
	s, _ := testServer(t, nil)
	max := s.cfg.Store.MaxChunkSize()
	c := client(t, s, 2)
	ctx := context.Background()
	err := c.Set(ctx, "big", strings.Repeat("x", int(max)+1), 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR") || !strings.Contains(err.Error(), fmt.Sprint(max)) ||
		!strings.Contains(err.Error(), "--max-chunk-size") {
		t.Fatalf("SET of %d bytes: %v, want an ERR naming the limit %d and --max-chunk-size", max+1, err, max)
	}
	if got := promtest.ToFloat64(s.m.errors.WithLabelValues("value_too_large")); got != 1 {
		t.Fatalf(`kvring_resp_errors_total{reason="value_too_large"} = %v, want 1`, got)
	}
	if err := c.Set(ctx, "small", "v", 0).Err(); err != nil {
		t.Fatalf("the connection after a refused large value: %v", err)
	}
	if got := nsSeries(t, s)["writes resp:default refused"]; got != 1 {
		t.Fatalf("refused writes of the default namespace = %v, want 1", got)
	}
	if v, err := c.Get(ctx, "small").Result(); err != nil || v != "v" {
		t.Fatalf("GET after a refused large value = %q, %v", v, err)
	}
	nc, r := rawConn(t, s)
	fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", maxBulk+1)
	if got := expectClosed(t, r); !strings.Contains(got, "invalid bulk length") {
		t.Fatalf("a bulk length past 512 MB: %q, want a protocol error", got)
	}
}

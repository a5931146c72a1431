package clustertest

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// echoServer accepts connections on 127.0.0.1 and echoes what they send,
// until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	lis := Listen(t)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return lis.Addr().String()
}

// TestMain runs the package's tests in a scratch directory.
func TestMain(m *testing.M) {
	s := testutil.NewScratch()
	s.Exit(m.Run())
}

// roundTrip writes b over c and reads it back.
func roundTrip(c net.Conn, b []byte) error {
	if _, err := c.Write(b); err != nil {
		return err
	}
	got := make([]byte, len(b))
	_, err := io.ReadFull(c, got)
	return err
}

// TestACutLinkRefusesAndClosesItsConnections: a cut refuses new
// connections and closes the open ones, both ways, and only between the
// two nodes; a heal lets connections through again.
func TestACutLinkRefusesAndClosesItsConnections(t *testing.T) {
	t.Parallel()
	n := NewNetwork()
	addr := echoServer(t)
	n.Name(addr, "b")
	ctx := context.Background()
	open, err := n.Dial(ctx, "a", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	other, err := n.Dial(ctx, "c", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	n.Cut("a", "b")
	if _, err := n.Dial(ctx, "a", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a dial over a cut link: %v", err)
	}
	if err := roundTrip(open, []byte("x")); err == nil {
		t.Fatal("a connection over a cut link still works")
	}
	if err := roundTrip(other, []byte("y")); err != nil {
		t.Fatalf("another node's connection: %v", err)
	}
	n.Heal("a", "b")
	again, err := n.Dial(ctx, "a", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := roundTrip(again, []byte("z")); err != nil {
		t.Fatal(err)
	}
}

// TestAHungLinkHoldsItsBytesUntilHealed: what crosses a hung link is held,
// undelivered, and delivered whole when the link heals; closing the
// connection ends a read that waits on it.
func TestAHungLinkHoldsItsBytesUntilHealed(t *testing.T) {
	t.Parallel()
	n := NewNetwork()
	addr := echoServer(t)
	n.Name(addr, "b")
	c, err := n.Dial(context.Background(), "a", addr)
	if err != nil {
		t.Fatal(err)
	}
	n.Hang("b", "a") // answers are held
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		if err == nil && string(buf) != "ping" {
			err = errors.New("read " + string(buf))
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the answer crossed a hung link: %v", err)
	default:
	}
	n.HealAll()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	n.Hang("b", "a")
	go func() {
		buf := make([]byte, 1)
		_, _ = c.Write([]byte("p"))
		_, err := c.Read(buf)
		got <- err
	}()
	n.Drop("a", "b")
	if err := <-got; err == nil {
		t.Fatal("a read on a dropped connection returned data")
	}
}

// TestADelayedLinkDeliversLate: a delay holds each write for its time.
func TestADelayedLinkDeliversLate(t *testing.T) {
	t.Parallel()
	n := NewNetwork()
	addr := echoServer(t)
	n.Name(addr, "b")
	c, err := n.Dial(context.Background(), "a", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const d = 50 * time.Millisecond
	n.Delay("a", "b", d)
	start := time.Now()
	if err := roundTrip(c, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("a write over a link delayed %s took %s", d, took)
	}
}

package coord

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// silentStream is a Put stream whose engine never sends: Recv blocks until
// the test lets it end (as gRPC cancels a stream once its handler returns).
type silentStream struct {
	putStream
	end chan struct{}
}

func (s *silentStream) Context() context.Context { return context.Background() }

func (s *silentStream) Recv() (*kvringv1.PutRequest, error) {
	<-s.end
	return nil, errors.New("stream cancelled")
}

// TestAPutWithoutABeginIsEndedAtTheIdleTimeout: a Put stream that never
// sends its begin message had no timeout at all. Now readBegin gives up
// after IdleTimeout and up to half of it again (the jitter spreads the ends
// of streams opened together), leaving its receiver to the coordinator,
// whose Close waits for it.
func TestAPutWithoutABeginIsEndedAtTheIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &Coordinator{cfg: Config{IdleTimeout: 10 * time.Second, Now: time.Now}}
		s := &silentStream{end: make(chan struct{})}
		start := time.Now()
		_, err := c.readBegin(s)
		if !errors.Is(err, errIdleStream) {
			t.Fatalf("readBegin of a silent stream: %v, want errIdleStream", err)
		}
		if waited := time.Since(start); waited < 10*time.Second || waited > 15*time.Second {
			t.Fatalf("ended after %s, want the idle timeout of 10s and at most half of it again", waited)
		}
		close(s.end) // the handler returned: gRPC cancels the stream
		c.recv.close()
	})
}

// TestNoReceiverStartsOnceCloseBegan: a put handler still running after
// the server stopped (Stop does not wait for handlers) must not add a
// receiver once Close waits for them (WaitGroup.Add after Wait was the
// race that withdrew the begin timeout before).
func TestNoReceiverStartsOnceCloseBegan(t *testing.T) {
	var r receivers
	if !r.start(func() {}) {
		t.Fatal("a receiver could not start before close")
	}
	r.close()
	if r.start(func() { t.Error("a receiver ran after close") }) {
		t.Fatal("a receiver started after close")
	}
	c := &Coordinator{cfg: Config{IdleTimeout: time.Second, Now: time.Now}}
	c.recv.close()
	if err := c.idleWatch(func() error { return nil }, newProgress(time.Now()), 0); !errors.Is(err, errClosing) {
		t.Fatalf("idleWatch after close: %v, want errClosing", err)
	}
}

// TestATrickleIsSlowerThanTheMinimumRate: a put's data phase must, once
// IdleTimeout has passed since it began, have received MinPutRate bytes per
// second (or every byte it waits for); messages that keep coming do not
// save a trickle.
func TestATrickleIsSlowerThanTheMinimumRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const idle, rate = 10 * time.Second, 1 << 20
	tests := []struct {
		name  string
		at    time.Duration // since the data phase began; a message just came
		bytes int64
		want  int64
		slow  bool
	}{
		{"within the grace, nothing arrived", 9 * time.Second, 0, 256 << 20, false},
		{"a trickle past the grace", 10 * time.Second, 64, 256 << 20, true},
		{"the minimum rate", 12 * time.Second, 12 << 20, 256 << 20, false},
		{"below the minimum rate", 20 * time.Second, 19 << 20, 256 << 20, true},
		{"every byte it waits for, slowly", 60 * time.Second, 4 << 20, 4 << 20, false},
	}
	for _, tt := range tests {
		p := newProgress(t0)
		p.seen(t0.Add(tt.at), int(tt.bytes))
		err := p.stalled(t0.Add(tt.at), idle, rate, tt.want)
		if slow := err != nil; slow != tt.slow {
			t.Errorf("%s: stalled = %v, want slow %v", tt.name, err, tt.slow)
		}
	}
	p := newProgress(t0)
	if err := p.stalled(t0.Add(idle), idle, rate, 0); !errors.Is(err, errIdleStream) {
		t.Errorf("no message for the idle timeout: %v, want errIdleStream", err)
	}
}

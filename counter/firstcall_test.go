package counter

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A store whose server never answers its first-contact EXISTS: the first call fails with
// ErrDisconnected, not ErrUncertain, after the probe timeout, and its command is never sent; the
// next call is refused without touching the client.
func TestFirstCallPingUnanswered(t *testing.T) {
	c := &hanging{}
	s, err := New(c, WithProbeTimeout(20*time.Millisecond), WithProbeInterval(time.Hour), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	_, err = s.IncrementWithExpire(context.Background(), slot0Key(), 1, 0)
	if !errors.Is(err, ErrDisconnected) || errors.Is(err, ErrUncertain) {
		t.Fatalf("first call = %v, want ErrDisconnected without ErrUncertain", err)
	}
	if s.Connected() {
		t.Fatal("the store must know it is disconnected")
	}
	if n := c.started.Load(); n != 1 {
		t.Fatalf("%d commands sent, want only the EXISTS", n)
	}
	if _, err := s.Get(context.Background(), slot0Key()); !errors.Is(err, ErrDisconnected) || c.started.Load() != 1 {
		t.Fatalf("second call = %v after %d commands, want a refusal without I/O", err, c.started.Load())
	}
}

// A caller's ctx that ends during the first-contact EXISTS returns its error and leaves the store
// connected: it says nothing about the server.
func TestFirstCallPingCallerCancelled(t *testing.T) {
	c := &hanging{}
	s, err := New(c, WithProbeTimeout(time.Hour), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = s.IncrementWithExpire(ctx, slot0Key(), 1, 0)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrDisconnected) || errors.Is(err, ErrUncertain) {
		t.Fatalf("first call = %v, want the ctx's error only", err)
	}
	if !s.Connected() || c.started.Load() != 1 {
		t.Fatalf("connected=%v after %d commands, want connected after the EXISTS only", s.Connected(), c.started.Load())
	}
}

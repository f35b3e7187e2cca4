package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClaimHandleShape: a Claim has the handles' keep-alive shape with no I/O before a renewal is due:
// KeepAlive returns at once, a second one is ErrKeepAliveRunning, Stop ends the claim's context
// (context.Canceled) and waits for the goroutine, and KeepAlive on an ended claim returns its cause; a
// claim whose Deadline passed ends with ErrExpired without any renewal.
func TestClaimHandleShape(t *testing.T) {
	s, err := New(noIO{}) // any I/O panics
	if err != nil {
		t.Fatal(err)
	}
	a := Attempt{State: Started, OwnerToken: goodToken, Lease: time.Hour, Deadline: time.Now().Add(time.Hour)}
	c, err := s.Claim("k", a)
	if err != nil {
		t.Fatal(err)
	}
	if c.Err() != nil || c.Context().Err() != nil {
		t.Fatalf("a fresh claim ended: %v", c.Err())
	}
	if err := c.KeepAlive(context.Background()); err != nil {
		t.Fatalf("KeepAlive = %v", err)
	}
	if err := c.KeepAlive(context.Background()); !errors.Is(err, ErrKeepAliveRunning) {
		t.Fatalf("second KeepAlive = %v, want ErrKeepAliveRunning", err)
	}
	c.Stop()
	c.Stop() // idempotent
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c.Context()), context.Canceled) {
		t.Fatalf("after Stop: Err %v", c.Err())
	}
	if err := c.KeepAlive(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("KeepAlive after Stop = %v, want the claim's cause", err)
	}

	a.Deadline = time.Now().Add(-time.Millisecond)
	late, err := s.Claim("k", a)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-late.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a claim past its Deadline did not end")
	}
	if !errors.Is(late.Err(), ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", late.Err())
	}
	late.Stop()
	if !errors.Is(late.Err(), ErrExpired) {
		t.Fatalf("Stop replaced the cause: %v", late.Err())
	}
}

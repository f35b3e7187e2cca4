package ownership

import (
	"context"
	"testing"
	"time"
)

// holdThrough waits until the keep-alive has sent n renewals, failing as soon as the handle stops
// vouching: the hold must never lapse while the (fake) server answers every renewal.
func holdThrough(t *testing.T, h *Handle, b *fakeBackend, n int32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.extends.Load() < n {
		if err := h.Err(); err != nil {
			t.Fatalf("the handle ended after %d renewals: %v", b.extends.Load(), err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d renewals in 20s", b.extends.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeepAliveFollowsShorterTTL: a confirmed ExtendTTL to a TTL shorter than the keep-alive's period
// re-arms it, so renewals follow the new TTL and the hold never lapses.
func TestKeepAliveFollowsShorterTTL(t *testing.T) {
	b := &fakeBackend{held: true}
	h := &Handle{}
	if err := h.Grant(context.Background(), b, &Config{Name: "t", Logger: quiet}, time.Now(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background()) //nolint:errcheck // the fake answers
	if err := h.KeepAlive(context.Background()); err != nil {
		t.Fatal(err)
	}
	holdThrough(t, h, b, 1) // the keep-alive's first renewal: its schedule runs at the 3s TTL
	if ok, err := h.ExtendTTL(context.Background(), 300*time.Millisecond); !ok || err != nil {
		t.Fatalf("ExtendTTL = %v, %v", ok, err)
	}
	holdThrough(t, h, b, 2+8) // eight renewals at the new TTL: several TTLs of 300ms
	if h.TTL() != 300*time.Millisecond {
		t.Fatalf("TTL %v", h.TTL())
	}
}

// TestKeepAliveStartedLate: a KeepAlive started with less than one period left renews at once.
func TestKeepAliveStartedLate(t *testing.T) {
	b := &fakeBackend{held: true}
	h := &Handle{}
	if err := h.Grant(context.Background(), b, &Config{Name: "t", Logger: quiet}, time.Now(), 900*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())                             //nolint:errcheck // the fake answers
	time.Sleep(time.Until(h.Deadline().Add(-100 * time.Millisecond))) // a third of a period left
	if err := h.KeepAlive(context.Background()); err != nil {
		t.Fatal(err)
	}
	holdThrough(t, h, b, 5) // several TTLs
}

// TestNextRenewal: the schedule's arithmetic, from the current deadline and TTL.
func TestNextRenewal(t *testing.T) {
	for _, tt := range []struct {
		fraction  float64
		ttl, left time.Duration
		want      time.Duration // due in (within 50ms)
	}{
		{1.0 / 3, 3 * time.Second, 3 * time.Second, time.Second}, // fresh: one period after the send
		{1.0 / 3, 3 * time.Second, 2500 * time.Millisecond, 500 * time.Millisecond},
		{1.0 / 3, 3 * time.Second, time.Second, 0},              // less than TTL − period left: at once
		{0.9, time.Second, time.Second, 550 * time.Millisecond}, // deadline − period/2 comes first
		{0.9, time.Second, 400 * time.Millisecond, 0},
	} {
		h := &Handle{cfg: &Config{RenewFraction: tt.fraction}, ttl: tt.ttl, deadline: time.Now().Add(tt.left)}
		got := h.nextRenewal()
		if got > tt.want || got < tt.want-50*time.Millisecond {
			t.Errorf("fraction %v ttl %v left %v: due in %v, want %v", tt.fraction, tt.ttl, tt.left, got, tt.want)
		}
	}
}

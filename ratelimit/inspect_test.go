package ratelimit

import (
	"context"
	"errors"
	"testing"
)

// TestInspectBeforeIO: argument and state errors of the inspection API come before any I/O.
func TestInspectBeforeIO(t *testing.T) {
	k, err := NewKeyed(noIO{}, fw10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Inspect(context.Background(), ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.Inspect(cctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Inspect(context.Background(), "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	l := newTestLimiter(t, noIO{}, "k", fw10)
	if _, err := l.Inspect(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	_ = l.Close(context.Background())
	if _, err := l.Inspect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

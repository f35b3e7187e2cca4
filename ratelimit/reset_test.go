package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRefundBeforeIO: the refund rules known from the policy are applied before any I/O (noIO
// panics on any command).
func TestRefundBeforeIO(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		p    Policy
		n    int64
		want error
	}{
		{"sliding", SlidingWindow{Limit: 3, Window: time.Second}, 1, ErrRefundUnsupported},
		{"composite with a sliding window", Composite{Components: []Component{fw10, SlidingWindow{Limit: 3, Window: time.Second}}}, 1, ErrRefundUnsupported},
		{"negative", fw10, -1, ErrNegativePermits},
		{"zero is a no-op", GCRA{Burst: 1, EmissionInterval: time.Second}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLimiter(t, noIO{}, "k", tc.p)
			if err := l.Refund(ctx, tc.n); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Refund = %v, want %v", err, tc.want)
			}
			if tc.want != nil && !errors.Is(l.Refund(ctx, tc.n), ErrInvalidConfig) {
				t.Fatal("not ErrInvalidConfig")
			}
		})
	}
	k, err := NewKeyed(noIO{}, fw10)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Refund(ctx, "", 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
	if err := k.Reset(ctx, ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
	_ = k.Close(ctx)
	if err := k.Reset(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

package luakit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWithoutDeadline(t *testing.T) {
	t.Parallel()
	t.Run("deadline becomes cancellation", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		ctx, stop := WithoutDeadline(parent)
		defer stop()
		if _, ok := ctx.Deadline(); ok {
			t.Fatal("returned context carries a deadline")
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("not cancelled at the parent's deadline")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", ctx.Err())
		}
	})
	t.Run("parent cancellation", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, stop := WithoutDeadline(parent)
		defer stop()
		if ctx.Err() != nil {
			t.Fatal("cancelled too early")
		}
		cancel()
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", ctx.Err())
		}
	})
	t.Run("stop ends it", func(t *testing.T) {
		ctx, stop := WithoutDeadline(context.Background())
		stop()
		<-ctx.Done()
	})
}

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
		parent, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		ctx, stop := WithoutDeadline(parent)
		stop()
		<-ctx.Done()
		if parent.Err() != nil {
			t.Fatal("stop ended the parent")
		}
	})
	t.Run("no deadline: ctx itself", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx, stop := WithoutDeadline(parent)
		defer stop()
		if ctx != parent {
			t.Fatal("a context without a deadline was wrapped")
		}
	})
}

// TestWithoutDeadlineNoAlloc: a context without a deadline costs nothing (not parallel: AllocsPerRun).
func TestWithoutDeadlineNoAlloc(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := testing.AllocsPerRun(100, func() { _, s := WithoutDeadline(parent); s() }); n != 0 {
		t.Fatalf("%v allocations per call without a deadline, want 0", n)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	t.Run("deadline", func(t *testing.T) {
		if err := Sleep(context.Background(), nil, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("watch wakes and is stopped", func(t *testing.T) {
		w := tr.Watch("k")
		tr.invalidate([]string{"k"})
		if err := Sleep(context.Background(), w, -1); err != nil {
			t.Fatal(err)
		}
		if n := tr.keys(); n != 0 {
			t.Fatalf("watch not stopped: %d keys tracked", n)
		}
	})
	t.Run("ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := Sleep(ctx, tr.Watch("k2"), time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep = %v, want Canceled", err)
		}
	})
}

func TestWithoutDeadlineEndedParent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	cancel()
	out, stop := WithoutDeadline(ctx)
	defer stop()
	if !errors.Is(out.Err(), context.Canceled) {
		t.Fatalf("WithoutDeadline(ended ctx).Err() = %v at once, want context.Canceled", out.Err())
	}
}

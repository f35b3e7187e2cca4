package ownership

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

// waitFor polls cond every millisecond for up to 20s, failing with what when it never holds. The
// bound is a hang guard, not a timing assertion: every condition polled here holds eventually when the
// code is right.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 20s: %s", what)
		}
	}
}

// schedulerOf returns cfg's scheduler in the registry, nil when none.
func schedulerOf(cfg *Config) *scheduler {
	registryMu.Lock()
	defer registryMu.Unlock()
	return registry[cfg]
}

// TestSchedulerManyHandles: a thousand handles of one Config keeping alive are renewed by one
// scheduler: the goroutine count grows by at most the timer goroutine and MaxRenewalsInFlight workers
// (and a few finishing workers at an instant), whatever the number of handles; every handle keeps
// vouching through several renewals; and once all are released the scheduler is gone (goleak in
// TestMain checks its goroutines).
func TestSchedulerManyHandles(t *testing.T) {
	const n = 1000
	cfg := &Config{Name: "t", Logger: quiet}
	before := runtime.NumGoroutine()
	bs := make([]*fakeBackend, n)
	hs := make([]*Handle, n)
	for i := range hs {
		bs[i] = &fakeBackend{held: true}
		hs[i] = &Handle{}
		if err := hs[i].Grant(context.Background(), bs[i], cfg, time.Now(), 600*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := hs[i].KeepAlive(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, h := range hs {
			_, _ = h.Release(context.Background())
		}
	}()
	peak := 0
	waitFor(t, "three renewals of every handle", func() bool {
		peak = max(peak, runtime.NumGoroutine()-before)
		for i, b := range bs {
			if err := hs[i].Err(); err != nil {
				t.Fatalf("handle %d ended: %v", i, err)
			}
			if b.extends.Load() < 3 {
				return false
			}
		}
		return true
	})
	// A worker frees its slot just before it returns, so the next one can start while it is still
	// counted: a few more than the bound for an instant.
	if limit := 1 + MaxRenewalsInFlight + 4; peak > limit {
		t.Fatalf("%d goroutines more while %d handles keep alive; want at most %d", peak, n, limit)
	}
	for _, h := range hs {
		if _, err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if s := schedulerOf(cfg); s != nil {
		t.Fatalf("the scheduler is still registered with %d handles keeping alive", s.active)
	}
}

// TestReleaseWaitsForRenewalInFlight: Release called while a keep-alive renewal is in flight (waiting
// for the server's reply, or still in its hook admission) cancels it and returns only after it
// finished, and no renewal is admitted or sent after Release returned.
func TestReleaseWaitsForRenewalInFlight(t *testing.T) {
	for _, where := range []string{"backend", "hook"} {
		t.Run(where, func(t *testing.T) {
			var (
				inFlight = make(chan struct{}, 1)
				finished atomic.Bool
				admitted atomic.Int32
			)
			// block holds the renewal until its ctx ends (Release cancels it), then a little longer.
			block := func(ctx context.Context) {
				inFlight <- struct{}{}
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond)
				finished.Store(true)
			}
			b := &fakeBackend{held: true}
			if where == "backend" {
				b.extendFn = func(ctx context.Context) (bool, error) {
					block(ctx)
					return false, luakit.ErrUncertain
				}
			}
			hook := hookFunc(func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
				if admitted.Add(1) == 1 && where == "hook" {
					block(ctx)
				}
				return ctx, func(luakit.HookOutcome, error) {}, nil
			})
			cfg := &Config{Name: "t", Logger: quiet, Hooks: luakit.Hooks{hook}}
			h := &Handle{}
			if err := h.Grant(context.Background(), b, cfg, time.Now(), 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if err := h.KeepAlive(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-inFlight
			if _, err := h.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !finished.Load() {
				t.Fatal("Release returned while the keep-alive's renewal was still in flight")
			}
			extends, admissions := b.extends.Load(), admitted.Load()
			time.Sleep(400 * time.Millisecond) // more than a TTL: any renewal still scheduled would be sent
			if got := b.extends.Load(); got != extends {
				t.Fatalf("%d renewals sent after Release returned", got-extends)
			}
			if got := admitted.Load(); got != admissions {
				t.Fatalf("%d operations admitted after Release returned", got-admissions)
			}
		})
	}
}

// TestKeepAliveCancelOneOfMany: ending one handle's KeepAlive ctx stops its renewals without releasing
// it and without touching the other handles of the same scheduler, whose renewals go on.
func TestKeepAliveCancelOneOfMany(t *testing.T) {
	cfg := &Config{Name: "t", Logger: quiet}
	const n = 5
	bs := make([]*fakeBackend, n)
	hs := make([]*Handle, n)
	cancels := make([]context.CancelFunc, n)
	for i := range hs {
		bs[i] = &fakeBackend{held: true}
		hs[i] = &Handle{}
		if err := hs[i].Grant(context.Background(), bs[i], cfg, time.Now(), 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		var ctx context.Context
		ctx, cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
		if err := hs[i].KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
		defer hs[i].Release(context.Background()) //nolint:errcheck // the fake answers
	}
	waitFor(t, "a renewal of every handle", func() bool {
		for _, b := range bs {
			if b.extends.Load() < 1 {
				return false
			}
		}
		return true
	})
	cancels[2]()
	// The AfterFunc stops it on its own goroutine: once stopped, a new KeepAlive is accepted.
	waitFor(t, "the cancelled keep-alive to stop", func() bool {
		h := hs[2]
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.kaActive && h.kaInFlight.Load() == 0
	})
	stopped := bs[2].extends.Load()
	others := make([]int32, n)
	for i, b := range bs {
		others[i] = b.extends.Load()
	}
	waitFor(t, "three more renewals of every other handle", func() bool {
		for i, b := range bs {
			if i != 2 && b.extends.Load() < others[i]+3 {
				return false
			}
		}
		return true
	})
	for i, h := range hs {
		if err := h.Err(); err != nil && i != 2 {
			t.Fatalf("handle %d ended: %v", i, err)
		}
	}
	if got := bs[2].extends.Load(); got != stopped {
		t.Fatalf("%d renewals of the cancelled keep-alive", got-stopped)
	}
	if bs[2].releases.Load() != 0 {
		t.Fatal("ending the keep-alive's ctx released the hold")
	}
	// Not released: it vouches until its estimate elapses, and may keep alive again.
	if err := hs[2].KeepAlive(context.Background()); err != nil && !errorsIsExpired(err) {
		t.Fatalf("KeepAlive again after the first one's ctx ended: %v", err)
	}
}

func errorsIsExpired(err error) bool { return errors.Is(err, luakit.ErrExpired) }

// TestSchedulerExitsWhenIdle: the scheduler's goroutines end once no handle keeps alive through it,
// whichever way the last keep-alive ended: Release, its ctx, the handle's loss, or ExtendNoExpiry.
func TestSchedulerExitsWhenIdle(t *testing.T) {
	cases := []struct {
		name string
		end  func(t *testing.T, h *Handle, b *fakeBackend, cancel context.CancelFunc)
	}{
		{"release", func(t *testing.T, h *Handle, b *fakeBackend, cancel context.CancelFunc) {
			if _, err := h.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{"ctx", func(t *testing.T, h *Handle, b *fakeBackend, cancel context.CancelFunc) { cancel() }},
		{"lost", func(t *testing.T, h *Handle, b *fakeBackend, cancel context.CancelFunc) {
			b.mu.Lock()
			b.held = false
			b.mu.Unlock()
			if ok, err := h.Verify(context.Background()); ok || err != nil {
				t.Fatalf("Verify = %v, %v", ok, err)
			}
		}},
		{"no_expiry", func(t *testing.T, h *Handle, b *fakeBackend, cancel context.CancelFunc) {
			if ok, err := h.ExtendNoExpiry(context.Background()); !ok || err != nil {
				t.Fatalf("ExtendNoExpiry = %v, %v", ok, err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			cfg := &Config{Name: "t", Logger: quiet}
			b := &fakeBackend{held: true}
			h := &Handle{}
			// A long TTL: the only renewal that could keep the scheduler busy is an hour away.
			if err := h.Grant(context.Background(), b, cfg, time.Now(), time.Hour); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := h.KeepAlive(ctx); err != nil {
				t.Fatal(err)
			}
			if schedulerOf(cfg) == nil {
				t.Fatal("no scheduler for a running keep-alive")
			}
			c.end(t, h, b, cancel)
			goleak.VerifyNone(t, ignore)
			if schedulerOf(cfg) != nil {
				t.Fatal("the scheduler is still registered")
			}
			_, _ = h.Release(context.Background())
		})
	}
}

// TestKeepAliveRunningOnce: a second KeepAlive while one runs returns ErrKeepAliveRunning on a shared
// scheduler as before, and one is accepted again after Release's stop (on a fresh handle state).
func TestKeepAliveRunningOnce(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, time.Minute)
	if err := h.KeepAlive(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.KeepAlive(context.Background()); err != luakit.ErrKeepAliveRunning { //nolint:errorlint // the value itself
		t.Fatalf("second KeepAlive = %v", err)
	}
}

// hookFunc is a luakit.Hook from a function.
type hookFunc func(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error)

func (f hookFunc) Admit(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
	return f(ctx, op)
}

// TestKeepAliveWithHandleContext: KeepAlive may be given the handle's own Context (or another
// handle's): it renews, and Release stops it, without deadlocking on the handle's mutex.
func TestKeepAliveWithHandleContext(t *testing.T) {
	b1, b2 := &fakeBackend{held: true}, &fakeBackend{held: true}
	h1, h2 := grant(t, b1, 300*time.Millisecond), grant(t, b2, 300*time.Millisecond)
	if err := h1.KeepAlive(h1.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h2.KeepAlive(h1.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three renewals of each handle", func() bool { return b1.extends.Load() >= 3 && b2.extends.Load() >= 3 })
	if _, err := h1.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// h1 ended, so h2's keep-alive (watching h1's context) stops without releasing h2.
	waitFor(t, "h2's keep-alive to stop with h1", func() bool {
		h2.mu.Lock()
		defer h2.mu.Unlock()
		return !h2.kaActive
	})
	if b2.releases.Load() != 0 {
		t.Fatal("h2 was released")
	}
}

package ownership

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBackend is the handle's bookkeeping under test, with the server's answers scripted. The real
// servers' behaviour is tested by integration/ownership; this checks the state machine alone.
type fakeBackend struct {
	mu       sync.Mutex
	held     bool
	extendFn func(ctx context.Context) (bool, error) // overrides the default answer when set
	releases atomic.Int32
	extends  atomic.Int32
	lastTTL  atomic.Int64 // the TTL of the latest Extend
	release  func(ctx context.Context) (bool, error)
}

func (b *fakeBackend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	b.extends.Add(1)
	b.lastTTL.Store(int64(ttl))
	if b.extendFn != nil {
		return b.extendFn(ctx)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, nil
}

func (b *fakeBackend) Verify(ctx context.Context) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, nil
}

func (b *fakeBackend) Release(ctx context.Context) (bool, error) {
	b.releases.Add(1)
	if b.release != nil {
		return b.release(ctx)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.held
	b.held = false
	return was, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func grant(t *testing.T, b *fakeBackend, ttl time.Duration) *Handle {
	t.Helper()
	h := &Handle{}
	if err := h.Grant(context.Background(), b, &Config{Name: "test", Logger: quiet}, time.Now(), ttl); err != nil {
		t.Fatalf("Grant: %v", err)
	}
	t.Cleanup(func() { h.stopKeepAlive(); h.mu.Lock(); h.endLocked(luakit.ErrReleased); h.mu.Unlock() })
	return h
}

func TestGrantLateReply(t *testing.T) {
	b := &fakeBackend{held: true}
	h := &Handle{}
	err := h.Grant(context.Background(), b, &Config{Logger: quiet}, time.Now().Add(-2*time.Second), time.Second)
	if !errors.Is(err, luakit.ErrLateReply) {
		t.Fatalf("Grant after the estimate elapsed: %v, want ErrLateReply", err)
	}
	if b.releases.Load() != 1 || b.held {
		t.Fatalf("late grant: %d releases, held %v; want the owner-checked cleanup", b.releases.Load(), b.held)
	}
}

func TestExtend(t *testing.T) {
	uncertain := errors.Join(luakit.ErrUncertain, context.DeadlineExceeded)
	tests := []struct {
		name        string
		answer      func(ctx context.Context) (bool, error)
		wantOK      bool
		wantErr     error // errors.Is target; nil: no error
		wantCause   error // handle's Err afterwards
		wantCleanup bool
	}{
		{name: "confirmed", answer: func(context.Context) (bool, error) { return true, nil }, wantOK: true},
		{name: "not held", answer: func(context.Context) (bool, error) { return false, nil }, wantCause: luakit.ErrLost},
		{name: "uncertain keeps the handle", answer: func(context.Context) (bool, error) { return false, uncertain },
			wantErr: luakit.ErrUncertain},
		{name: "context error is uncertain", answer: func(context.Context) (bool, error) { return false, context.DeadlineExceeded },
			wantErr: luakit.ErrUncertain},
		{name: "late reply surrenders", answer: func(context.Context) (bool, error) {
			time.Sleep(250 * time.Millisecond)
			return true, nil
		}, wantCause: luakit.ErrExpired, wantCleanup: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{held: true, extendFn: tc.answer}
			h := grant(t, b, 200*time.Millisecond)
			before := h.Deadline()
			done := h.Done()
			ok, err := h.Extend(context.Background())
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if got := h.Err(); !errors.Is(got, tc.wantCause) || (tc.wantCause == nil && got != nil) {
				t.Errorf("Err() = %v, want %v", got, tc.wantCause)
			}
			if tc.wantOK && !h.Deadline().After(before) {
				t.Errorf("confirmed renewal did not move the deadline")
			}
			if !tc.wantOK && tc.wantCause == nil && !h.Deadline().Equal(before) {
				t.Errorf("failed renewal moved the deadline")
			}
			if got := b.releases.Load() > 0; got != tc.wantCleanup {
				t.Errorf("cleanup sent = %v, want %v", got, tc.wantCleanup)
			}
			if h.Done() != done {
				t.Errorf("Done changed")
			}
		})
	}
}

func TestExtendEndedHandleNoIO(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, 30*time.Millisecond)
	<-h.Done()
	if !errors.Is(h.Err(), luakit.ErrExpired) {
		t.Fatalf("Err() = %v, want ErrExpired", h.Err())
	}
	ok, err := h.Extend(context.Background())
	if ok || err != nil || b.extends.Load() != 0 {
		t.Fatalf("Extend on an ended handle = (%v, %v) with %d sends; want (false, nil), no I/O", ok, err, b.extends.Load())
	}
	if h.Remaining() != 0 {
		t.Fatalf("Remaining = %v after expiry", h.Remaining())
	}
}

func TestReleaseCancelledContextSendsNothing(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.Release(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, luakit.ErrUncertain) {
		t.Fatalf("Release(cancelled) = %v; want context.Canceled, not uncertain", err)
	}
	if h.Err() != nil || b.releases.Load() != 0 {
		t.Fatalf("after a release that sent nothing: Err %v, %d sends; want a usable handle", h.Err(), b.releases.Load())
	}
	out, err := h.Release(context.Background())
	if err != nil || out != Released {
		t.Fatalf("Release = (%v, %v), want Released", out, err)
	}
	if !errors.Is(h.Err(), luakit.ErrReleased) {
		t.Fatalf("Err() = %v, want ErrReleased", h.Err())
	}
}

func TestReleaseOutcomes(t *testing.T) {
	t.Run("concurrent", func(t *testing.T) {
		b := &fakeBackend{held: true}
		h := grant(t, b, time.Minute)
		var wg sync.WaitGroup
		var released, already atomic.Int32
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := h.Release(context.Background())
				switch {
				case err != nil:
					t.Errorf("Release: %v", err)
				case out == Released:
					released.Add(1)
				case out == AlreadyReleased:
					already.Add(1)
				}
			}()
		}
		wg.Wait()
		if released.Load() != 1 || already.Load() != 7 || b.releases.Load() != 1 {
			t.Fatalf("released %d, already %d, sends %d; want 1, 7, 1", released.Load(), already.Load(), b.releases.Load())
		}
	})
	t.Run("not owned", func(t *testing.T) {
		b := &fakeBackend{held: false}
		h := grant(t, b, time.Minute)
		if out, err := h.Release(context.Background()); err != nil || out != NotOwned {
			t.Fatalf("Release = (%v, %v), want NotOwned", out, err)
		}
	})
	t.Run("uncertain then settled", func(t *testing.T) {
		b := &fakeBackend{held: true}
		first := true
		b.release = func(ctx context.Context) (bool, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.held = false
			if first {
				first = false
				return false, context.DeadlineExceeded
			}
			return false, nil
		}
		h := grant(t, b, time.Minute)
		if _, err := h.Release(context.Background()); !errors.Is(err, luakit.ErrUncertain) {
			t.Fatalf("first Release: %v, want ErrUncertain", err)
		}
		if out, err := h.Release(context.Background()); err != nil || out != AlreadyReleased {
			t.Fatalf("second Release = (%v, %v), want AlreadyReleased", out, err)
		}
		if out, err := h.Release(context.Background()); err != nil || out != AlreadyReleased || b.releases.Load() != 2 {
			t.Fatalf("third Release = (%v, %v) after %d sends, want AlreadyReleased without I/O", out, err, b.releases.Load())
		}
	})
}

func TestReleaseWaitsForExtend(t *testing.T) {
	entered, proceed := make(chan struct{}), make(chan struct{})
	b := &fakeBackend{held: true}
	b.extendFn = func(context.Context) (bool, error) {
		close(entered)
		<-proceed
		return true, nil
	}
	h := grant(t, b, time.Minute)
	extended := make(chan bool)
	go func() {
		ok, _ := h.Extend(context.Background())
		extended <- ok
	}()
	<-entered
	released := make(chan Outcome)
	go func() {
		out, _ := h.Release(context.Background())
		released <- out
	}()
	select {
	case <-released:
		t.Fatal("Release overtook an in-flight Extend")
	case <-time.After(50 * time.Millisecond):
	}
	close(proceed)
	if !<-extended {
		t.Fatal("in-flight Extend lost its confirmation")
	}
	if out := <-released; out != Released {
		t.Fatalf("Release after the Extend = %v, want Released", out)
	}
}

func TestVerify(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, time.Minute)
	if ok, err := h.Verify(context.Background()); !ok || err != nil {
		t.Fatalf("Verify = (%v, %v), want (true, nil)", ok, err)
	}
	b.mu.Lock()
	b.held = false
	b.mu.Unlock()
	if ok, err := h.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify = (%v, %v), want (false, nil)", ok, err)
	}
	if !errors.Is(h.Err(), luakit.ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", h.Err())
	}
}

func TestKeepAlive(t *testing.T) {
	t.Run("renews and stops on release", func(t *testing.T) {
		b := &fakeBackend{held: true}
		h := grant(t, b, 60*time.Millisecond)
		if err := h.KeepAlive(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := h.KeepAlive(context.Background()); !errors.Is(err, luakit.ErrKeepAliveRunning) {
			t.Fatalf("second KeepAlive: %v, want ErrKeepAliveRunning", err)
		}
		time.Sleep(200 * time.Millisecond)
		if h.Err() != nil || b.extends.Load() < 2 {
			t.Fatalf("after 200ms of a 60ms lease: Err %v, %d renewals", h.Err(), b.extends.Load())
		}
		if out, err := h.Release(context.Background()); err != nil || out != Released {
			t.Fatalf("Release = (%v, %v)", out, err)
		}
	})
	t.Run("ends on loss", func(t *testing.T) {
		b := &fakeBackend{held: true}
		h := grant(t, b, 60*time.Millisecond)
		if err := h.KeepAlive(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		b.held = false
		b.mu.Unlock()
		select {
		case <-h.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("keep-alive did not end the handle")
		}
		if !errors.Is(h.Err(), luakit.ErrLost) {
			t.Fatalf("Err() = %v, want ErrLost", h.Err())
		}
		h.stopKeepAlive()
	})
	t.Run("no expiry", func(t *testing.T) {
		b := &fakeBackend{held: true}
		h := grant(t, b, 0)
		if err := h.KeepAlive(context.Background()); err != nil {
			t.Fatal(err)
		}
		if h.Remaining() != Forever || !h.Deadline().IsZero() {
			t.Fatalf("no-expiry handle: Remaining %v, Deadline %v", h.Remaining(), h.Deadline())
		}
	})
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Released: "released", AlreadyReleased: "already_released",
		NotOwned: "not_owned", 0: "Outcome(0)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), want)
		}
	}
}

func TestClose(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, time.Minute)
	if err := h.Close(); err != nil || b.held || !errors.Is(h.Err(), luakit.ErrReleased) {
		t.Fatalf("Close = %v, held %v, Err %v; want the hold released", err, b.held, h.Err())
	}
	if err := h.Close(); err != nil || b.releases.Load() != 1 {
		t.Fatalf("second Close = %v after %d sends; want nil without I/O", err, b.releases.Load())
	}
}

func TestExtendTTLValidation(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, time.Minute)
	for _, ttl := range []time.Duration{-time.Second, 0, 999 * time.Microsecond} {
		if _, err := h.ExtendTTL(context.Background(), ttl); !errors.Is(err, luakit.ErrInvalidTTL) {
			t.Errorf("ExtendTTL(%v) = %v, want ErrInvalidTTL", ttl, err)
		}
	}
	if b.extends.Load() != 0 {
		t.Fatalf("invalid TTLs sent %d renewals", b.extends.Load())
	}
	if ok, err := h.ExtendTTL(context.Background(), 1500*time.Microsecond); !ok || err != nil || h.TTL() != time.Millisecond {
		t.Fatalf("ExtendTTL(1.5ms) = (%v, %v), TTL %v; want truncated to 1ms", ok, err, h.TTL())
	}
}

// TestExtendNoExpiry: a hold without expiry is asked for by ExtendNoExpiry, never by a TTL: a CheckTTL
// that would accept 0 is not consulted below 1ms; ExtendNoExpiry sends 0 and the hold then has no
// estimate; Extend keeps it so; ExtendTTL gives it a TTL again.
func TestExtendNoExpiry(t *testing.T) {
	b := &fakeBackend{held: true}
	h := &Handle{}
	cfg := &Config{Name: "test", Logger: quiet, CheckTTL: func(ttl time.Duration) (time.Duration, error) { return ttl, nil }}
	if err := h.Grant(context.Background(), b, cfg, time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.stopKeepAlive(); h.mu.Lock(); h.endLocked(luakit.ErrReleased); h.mu.Unlock() })
	if _, err := h.ExtendTTL(context.Background(), 0); !errors.Is(err, luakit.ErrInvalidTTL) || b.extends.Load() != 0 {
		t.Fatalf("ExtendTTL(0) with a lenient CheckTTL = %v after %d sends; want ErrInvalidTTL, no I/O", err, b.extends.Load())
	}
	for i, step := range []func() (bool, error){
		func() (bool, error) { return h.ExtendNoExpiry(context.Background()) },
		func() (bool, error) { return h.Extend(context.Background()) },
	} {
		if ok, err := step(); !ok || err != nil || b.lastTTL.Load() != 0 {
			t.Fatalf("step %d = (%v, %v), sent TTL %v; want renewed without expiry", i, ok, err, time.Duration(b.lastTTL.Load()))
		}
		if h.TTL() != 0 || h.Remaining() != Forever || !h.Deadline().IsZero() {
			t.Fatalf("step %d: TTL %v, Remaining %v, Deadline %v", i, h.TTL(), h.Remaining(), h.Deadline())
		}
	}
	if ok, err := h.ExtendTTL(context.Background(), time.Minute); !ok || err != nil || h.TTL() != time.Minute || h.Deadline().IsZero() {
		t.Fatalf("ExtendTTL(1m) = (%v, %v), TTL %v, Deadline %v", ok, err, h.TTL(), h.Deadline())
	}
}

// The accessors agree at every instant, even when the expiry timer is late: here it never fires (it is
// stopped, as a timer that the scheduler has not run yet). Once the estimate elapsed, each accessor on
// its own, called first, finds the handle ended with ErrExpired, and every other one agrees.
func TestAccessorsAgreeWhenTimerIsLate(t *testing.T) {
	first := map[string]func(h *Handle) bool{
		"Err":         func(h *Handle) bool { return h.Err() != nil },
		"Remaining":   func(h *Handle) bool { return h.Remaining() == 0 },
		"Done":        func(h *Handle) bool { return isClosed(h.Done()) },
		"Context.Err": func(h *Handle) bool { return h.Context().Err() != nil },
		"Context.Done": func(h *Handle) bool {
			return isClosed(h.Context().Done())
		},
		"Extend": func(h *Handle) bool { ok, err := h.Extend(context.Background()); return !ok && err == nil },
		"Verify": func(h *Handle) bool { ok, err := h.Verify(context.Background()); return !ok && err == nil },
		"KeepAlive": func(h *Handle) bool {
			return errors.Is(h.KeepAlive(context.Background()), luakit.ErrExpired)
		},
	}
	for name, ended := range first {
		t.Run(name, func(t *testing.T) {
			b := &fakeBackend{held: true}
			h := grant(t, b, 20*time.Millisecond)
			if h.Err() != nil || h.Remaining() <= 0 || isClosed(h.Done()) {
				t.Fatal("a new handle vouches")
			}
			h.mu.Lock()
			h.timer.Stop() // armed by Done: the handle's context exists
			deadline := h.deadline
			h.mu.Unlock()
			time.Sleep(time.Until(deadline))
			for !time.Now().After(deadline) {
				time.Sleep(time.Millisecond)
			}
			if !ended(h) {
				t.Fatalf("%s still vouches after the estimate elapsed", name)
			}
			if !errors.Is(h.Err(), luakit.ErrExpired) || h.Remaining() != 0 || !isClosed(h.Done()) ||
				!errors.Is(context.Cause(h.Context()), luakit.ErrExpired) || h.Context().Err() == nil {
				t.Fatalf("after %s: Err %v, Remaining %v, Done closed %v, Context %v", name, h.Err(),
					h.Remaining(), isClosed(h.Done()), context.Cause(h.Context()))
			}
			if n := b.extends.Load(); n != 0 {
				t.Fatalf("%d renewals sent for an elapsed estimate", n)
			}
		})
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSetRenewFractionBounds(t *testing.T) {
	for _, tt := range []struct {
		f  float64
		ok bool
	}{{0, false}, {0.011, false}, {0.049, false}, {0.05, true}, {1.0 / 3, true}, {0.9, true}, {0.91, false}} {
		var c Config
		err := c.SetRenewFraction(tt.f)
		if (err == nil) != tt.ok {
			t.Errorf("SetRenewFraction(%v): err = %v, want ok = %v", tt.f, err, tt.ok)
		}
	}
}

// TestGrantReleaseAllocations: a handle that is granted and released without anyone waiting on it
// (no Done, Context or KeepAlive) allocates nothing beyond itself: its context and deadline timer
// are made on first need, and the operation slot needs no channel.
func TestGrantReleaseAllocations(t *testing.T) {
	b := &fakeBackend{}
	cfg := &Config{Name: "test", Logger: quiet}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		b.held = true
		h := new(Handle)
		if err := h.Grant(ctx, b, cfg, time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if out, err := h.Release(ctx); err != nil || out != Released {
			t.Fatalf("Release = %v, %v", out, err)
		}
	})
	if allocs > 1 {
		t.Fatalf("Grant+Release allocated %v times per cycle; want at most 1 (the Handle)", allocs)
	}
}

// TestLazyContextAgrees: the context made on first need after the handle ended is already cancelled
// with the handle's cause, and a handle released after its estimate elapsed, with no timer armed,
// ends with ErrExpired as a fired timer would have ended it.
func TestLazyContextAgrees(t *testing.T) {
	b := &fakeBackend{held: true}
	h := grant(t, b, time.Minute)
	if _, err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isClosed(h.Done()) || !errors.Is(context.Cause(h.Context()), luakit.ErrReleased) || !errors.Is(h.Context().Err(), context.Canceled) {
		t.Fatalf("after Release: Done closed %v, cause %v, Err %v", isClosed(h.Done()), context.Cause(h.Context()), h.Context().Err())
	}

	h = grant(t, &fakeBackend{held: true}, 5*time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	if _, err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Err(); !errors.Is(err, luakit.ErrExpired) {
		t.Fatalf("released after the estimate elapsed: Err = %v, want ErrExpired", err)
	}
}

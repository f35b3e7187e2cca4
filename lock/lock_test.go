package lock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a rueidis.Client whose every method except Mode panics: validation tests use it to prove that
// bad input is rejected before any I/O.
type noIO struct {
	rueidis.Client
	mode rueidis.ClientMode
}

func (c noIO) Mode() rueidis.ClientMode { return c.mode }

func TestNew(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ErrNilClient) {
		t.Fatalf("New(nil) = %v, want ErrNilClient", err)
	}
	tests := []struct {
		name string
		opt  Option
		ok   bool
	}{
		{"prefix", WithKeyPrefix("app:"), true},
		{"binary prefix", WithKeyPrefix("\x00\xff{t}"), true},
		{"tracker", WithTracker(luakit.NewTracker()), true},
		{"fraction", WithRenewFraction(0.5), true},
		{"fraction zero", WithRenewFraction(0), false},
		{"fraction too large", WithRenewFraction(0.95), false},
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"retry", WithRetryDelay(time.Millisecond), true},
		{"retry negative", WithRetryDelay(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), false},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(noIO{}, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New(%s) error = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if tt.ok && l == nil {
				t.Fatal("nil Locker without error")
			}
		})
	}
}

func TestValidationBeforeIO(t *testing.T) {
	tests := []struct {
		name         string
		mode         rueidis.ClientMode
		prefix       string
		lease, fence string
		ttl          time.Duration
		want         error
	}{
		{"empty lease key", rueidis.ClientModeStandalone, "", "", "f", time.Second, luakit.ErrEmptyKey},
		{"empty fence key", rueidis.ClientModeStandalone, "", "l", "", time.Second, luakit.ErrEmptyKey},
		{"zero ttl", rueidis.ClientModeStandalone, "", "l", "f", 0, ErrInvalidTTL},
		{"sub-ms ttl", rueidis.ClientModeStandalone, "", "l", "f", 999 * time.Microsecond, ErrInvalidTTL},
		{"negative ttl", rueidis.ClientModeStandalone, "", "l", "f", -time.Second, ErrInvalidTTL},
		{"same key", rueidis.ClientModeStandalone, "", "k", "k", time.Second, ErrSameKey},
		{"same key after prefix", rueidis.ClientModeStandalone, "p:", "k", "k", time.Second, ErrSameKey},
		{"cross slot on cluster", rueidis.ClientModeCluster, "", "a:lease", "b:fence", time.Second, luakit.ErrCrossSlot},
		{"prefix tag moves both but keys still differ", rueidis.ClientModeCluster, "", "{a}x", "{b}x", time.Second, luakit.ErrCrossSlot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(noIO{mode: tt.mode}, WithKeyPrefix(tt.prefix))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.TryAcquire(ctx, tt.lease, tt.fence, tt.ttl); !errors.Is(err, tt.want) {
				t.Errorf("TryAcquire error = %v, want %v", err, tt.want)
			}
			if _, err := l.Acquire(ctx, tt.lease, tt.fence, tt.ttl); !errors.Is(err, tt.want) {
				t.Errorf("Acquire error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPrepareSameSlot(t *testing.T) {
	l, err := New(noIO{mode: rueidis.ClientModeCluster}, WithKeyPrefix("{tenant}"))
	if err != nil {
		t.Fatal(err)
	}
	// A prefix with a hash tag puts every key in its slot, so these distinct keys are accepted.
	k, ms, err := l.prepare("a:lease", "b:fence", 1500*time.Microsecond)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if k.lease != "{tenant}a:lease" || k.fence != "{tenant}b:fence" || ms != 1 {
		t.Fatalf("prepare = %+v, %d; want prefixed keys and 1ms (truncated)", k, ms)
	}
}

func TestCounterError(t *testing.T) {
	for _, r := range []CounterReason{CounterExpiring, CounterNegative, CounterMalformed, CounterOverflow, CounterWrongType, "other"} {
		err := error(&CounterError{Reason: r})
		if !errors.Is(err, ErrCounter) {
			t.Errorf("%s: not ErrCounter", r)
		}
		if !strings.HasPrefix(err.Error(), "lock: ") {
			t.Errorf("%s: message %q lacks package prefix", r, err.Error())
		}
	}
}

func TestReleaseOutcomeString(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned", 0: "ReleaseOutcome(0)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}

func TestFence(t *testing.T) {
	var f Fence[string]
	steps := []struct {
		token int64
		value string
		want  bool
	}{
		{0, "zero", false},
		{-1, "negative", false},
		{12, "new owner", true},
		{11, "stale owner", false},
		{12, "same lease again", true},
		{13, "next owner", true},
	}
	for _, s := range steps {
		if got := f.TryWrite(s.token, s.value); got != s.want {
			t.Errorf("TryWrite(%d) = %v, want %v", s.token, got, s.want)
		}
	}
	v, last := f.Value()
	if v != "next owner" || last != 13 {
		t.Errorf("Value = %q, %d", v, last)
	}
	if a, r := f.Counts(); a != 3 || r != 3 {
		t.Errorf("Counts = %d, %d; want 3, 3", a, r)
	}
}

func TestFence_Concurrent(t *testing.T) {
	var f Fence[int64]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(1); i <= 1000; i++ {
				f.TryWrite(i, i)
			}
		}()
	}
	wg.Wait()
	v, last := f.Value()
	if v != 1000 || last != 1000 {
		t.Fatalf("Value = %d, %d; want 1000, 1000", v, last)
	}
	a, r := f.Counts()
	if a+r != 8000 || a < 1000 {
		t.Fatalf("Counts = %d, %d", a, r)
	}
}

// TestLeaseLocalState covers the handle's local bookkeeping without a server: the estimate, Done on
// expiry, and Extend refusing without I/O once the estimate elapsed.
func TestLeaseLocalState(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := newLease(l, keys{lease: "l", fence: "f"}, "l", "f", "owner", 7, 20*time.Millisecond, time.Now().Add(20*time.Millisecond))
	if h.FencingToken() != 7 || h.OwnerToken() != "owner" || h.LeaseKey() != "l" || h.FenceKey() != "f" || h.TTL() != 20*time.Millisecond {
		t.Fatal("accessors disagree with construction")
	}
	if h.Err() != nil || h.Remaining() <= 0 {
		t.Fatalf("fresh lease: Err=%v Remaining=%v", h.Err(), h.Remaining())
	}
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the estimate elapsed")
	}
	if !errors.Is(h.Err(), ErrExpired) || !errors.Is(context.Cause(h.Context()), ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", h.Err())
	}
	if h.Remaining() != 0 {
		t.Fatalf("Remaining after expiry = %v", h.Remaining())
	}
	// noIO would panic if Extend contacted the server.
	if ok, err := h.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v; want false, nil", ok, err)
	}
	if err := h.KeepAlive(context.Background()); !errors.Is(err, ErrExpired) {
		t.Fatalf("KeepAlive after expiry = %v", err)
	}
}

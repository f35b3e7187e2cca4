package lease

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

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
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"cleanup negative", WithCleanupTimeout(-time.Second), false},
		{"renew fraction", WithRenewFraction(0.5), true},
		{"renew fraction max", WithRenewFraction(0.9), true},
		{"renew fraction zero", WithRenewFraction(0), false},
		{"renew fraction above 0.9", WithRenewFraction(0.91), false},
		{"renew fraction NaN", WithRenewFraction(math.NaN()), false},
		{"retry", WithRetryDelay(time.Millisecond), true},
		{"retry zero", WithRetryDelay(0), false},
		{"retry negative", WithRetryDelay(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), true},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := New(noIO{}, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New(%s) error = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if tt.ok && ls == nil {
				t.Fatal("nil Leases without error")
			}
			if !tt.ok && err != nil && !strings.HasPrefix(err.Error(), "lease: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	c := ls.cfg
	if c.own.Name != "lease" || c.own.CleanupTimeout != time.Second || c.own.RetryDelay != 50*time.Millisecond ||
		c.own.RenewFraction != 1.0/3 || c.own.Logger == nil || c.own.Margin != nil || c.own.CheckTTL != nil ||
		c.tracker != nil || c.keys.Prefix() != "" {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

// TestOwnershipConfig checks that the options reach the one ownership.Config and Waiter of a Leases.
func TestOwnershipConfig(t *testing.T) {
	tr := luakit.NewTracker()
	lg := slog.New(slog.DiscardHandler)
	client := noIO{}
	ls, err := New(client, WithRenewFraction(0.5), WithRetryDelay(7*time.Millisecond),
		WithCleanupTimeout(3*time.Second), WithLogger(lg), WithTracker(tr))
	if err != nil {
		t.Fatal(err)
	}
	want := ownership.Config{
		Name: "lease", RenewFraction: 0.5, RetryDelay: 7 * time.Millisecond, CleanupTimeout: 3 * time.Second, Logger: lg,
	}
	got := ls.cfg.own
	if got.Name != want.Name || got.RenewFraction != want.RenewFraction || got.RetryDelay != want.RetryDelay ||
		got.CleanupTimeout != want.CleanupTimeout || got.Logger != want.Logger || got.Margin != nil {
		t.Fatalf("ownership config = %+v, want %+v", got, want)
	}
	if ls.waiter.Config != &ls.cfg.own || ls.waiter.Tracker != tr || ls.waiter.Client != client {
		t.Fatal("the waiter is not wired to the Leases' config, tracker and client")
	}
}

func TestValidationBeforeIO(t *testing.T) {
	tests := []struct {
		name         string
		hash, field  string
		ttl          time.Duration
		want         error
		wantInString string
	}{
		{"empty hash key", "", "f", time.Second, luakit.ErrEmptyKey, "hash key"},
		{"empty field", "h", "", time.Second, ErrEmptyField, "field"},
		{"zero ttl", "h", "f", 0, ErrInvalidTTL, "1ms"},
		{"sub-ms ttl", "h", "f", 999 * time.Microsecond, ErrInvalidTTL, "999µs"},
		{"negative ttl", "h", "f", -time.Second, ErrInvalidTTL, "-1s"},
	}
	for _, mode := range []rueidis.ClientMode{rueidis.ClientModeStandalone, rueidis.ClientModeCluster} {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ls, err := New(noIO{ClientMode: mode}, WithKeyPrefix("p:"))
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				l, err := ls.TryAcquire(ctx, tt.hash, tt.field, tt.ttl)
				if !errors.Is(err, tt.want) || !errors.Is(err, luakit.ErrInvalidConfig) || l != nil {
					t.Errorf("TryAcquire = %v, %v; want nil, %v", l, err, tt.want)
				}
				if err != nil && !strings.Contains(err.Error(), tt.wantInString) {
					t.Errorf("TryAcquire error %q does not mention %q", err, tt.wantInString)
				}
				if l, err := ls.Acquire(ctx, tt.hash, tt.field, tt.ttl); !errors.Is(err, tt.want) || l != nil {
					t.Errorf("Acquire = %v, %v; want nil, %v", l, err, tt.want)
				}
			})
		}
	}
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Inspect(context.Background(), ""); !errors.Is(err, luakit.ErrEmptyKey) {
		t.Errorf("Inspect(\"\") = %v, want ErrEmptyKey", err)
	}
}

func TestValidatePrefixAndTruncation(t *testing.T) {
	ls, err := New(noIO{}, WithKeyPrefix("\x00pre{t}:"))
	if err != nil {
		t.Fatal(err)
	}
	key, ms, err := ls.validate("h\xff", "f\x00", 1500*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if key != "\x00pre{t}:h\xff" || ms != 1 {
		t.Fatalf("validate = %q, %d; want the prefixed key and 1ms (truncated)", key, ms)
	}
}

func TestReleaseOutcome(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned", 0: "Outcome(0)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
	if Released != ownership.Released || AlreadyReleased != ownership.AlreadyReleased || NotOwned != ownership.NotOwned {
		t.Fatal("release outcomes differ from ownership's")
	}
}

func TestErrors(t *testing.T) {
	_, nilErr := New(nil)
	for _, err := range []error{ErrExpiringHash, ErrEmptyField, nilErr} {
		if !strings.HasPrefix(err.Error(), "lease: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
	if !errors.Is(nilErr, luakit.ErrNilClient) {
		t.Errorf("New(nil) = %v, want luakit.ErrNilClient", nilErr)
	}
	if !errors.Is(ErrEmptyField, luakit.ErrInvalidConfig) {
		t.Errorf("ErrEmptyField does not match ErrInvalidConfig")
	}
	// A key-level expiry on the hash is a setting of the key found on the server: neither foreign data
	// nor a bad argument.
	if errors.Is(ErrExpiringHash, luakit.ErrForeignData) || errors.Is(ErrExpiringHash, luakit.ErrInvalidConfig) {
		t.Errorf("ErrExpiringHash matches ErrForeignData or ErrInvalidConfig")
	}
	shared := map[error]error{
		ErrNotAcquired: luakit.ErrNotAcquired, ErrLateReply: luakit.ErrLateReply, ErrUncertain: luakit.ErrUncertain,
		ErrLost: luakit.ErrLost, ErrExpired: luakit.ErrExpired, ErrReleased: luakit.ErrReleased,
		ErrKeepAliveRunning: luakit.ErrKeepAliveRunning, ErrInvalidTTL: luakit.ErrInvalidTTL,
		ErrNilClient: luakit.ErrNilClient,
	}
	for ours, theirs := range shared {
		if ours != theirs {
			t.Errorf("%q is not luakit's value", ours)
		}
	}
}

func TestDecodeHolders(t *testing.T) {
	got, err := decodeHolders(replytest.Array(t, 1, "b\x00", 1500, "a", -1, "\xff", 0))
	if err != nil {
		t.Fatal(err)
	}
	want := []Holder{{"a", 0, true}, {"b\x00", 1500 * time.Millisecond, false}, {"\xff", 0, false}}
	if len(got) != len(want) {
		t.Fatalf("decodeHolders = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("decodeHolders[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if h, err := decodeHolders(replytest.Array(t, 1)); err != nil || len(h) != 0 {
		t.Fatalf("no holders = %v, %v", h, err)
	}
	if _, err := decodeHolders(nil); err == nil {
		t.Fatal("reply without a status accepted")
	}
	if _, err := decodeHolders(replytest.Array(t, "a", 1)); err == nil {
		t.Fatal("reply without a status accepted")
	}
	if _, err := decodeHolders(replytest.Array(t, 1, "a")); err == nil {
		t.Fatal("odd reply accepted")
	}
	if _, err := decodeHolders(replytest.Array(t, 1, 1, 1)); err == nil {
		t.Fatal("integer field accepted")
	}
}

// granted returns a Lease of ls started by Grant as if the acquisition was sent at start, without I/O.
func granted(t *testing.T, ls *Leases, ttl time.Duration, start time.Time) *Lease {
	t.Helper()
	l := ls.newLease("p:h", "h", "f", ttl.Milliseconds())
	if err := l.own.Grant(context.Background(), &l.b, &ls.cfg.own, start, ttl); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLeaseLocalState covers the handle's local bookkeeping without a server: accessors, the estimate,
// Done on expiry fixed for life, and Extend / Verify / KeepAlive refusing I/O once the handle ended
// (noIO panics on any command).
func TestLeaseLocalState(t *testing.T) {
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h := granted(t, ls, 20*time.Millisecond, start)
	if h.HashKey() != "h" || h.Name() != "f" || len(h.OwnerToken()) != 32 || h.TTL() != 20*time.Millisecond {
		t.Fatal("accessors disagree with construction")
	}
	if !h.Deadline().Equal(start.Add(20*time.Millisecond - ownership.ServerClockStep)) {
		t.Fatalf("Deadline = %v, want start + TTL - ServerClockStep", h.Deadline())
	}
	if h.Err() != nil || h.Remaining() <= 0 {
		t.Fatalf("fresh lease: Err=%v Remaining=%v", h.Err(), h.Remaining())
	}
	done, hctx := h.Done(), h.Context()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the estimate elapsed")
	}
	if !errors.Is(h.Err(), ErrExpired) || !errors.Is(context.Cause(h.Context()), ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", h.Err())
	}
	if h.Remaining() != 0 {
		t.Fatalf("Remaining after expiry = %v", h.Remaining())
	}
	if ok, err := h.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v; want false, nil without I/O", ok, err)
	}
	if ok, err := h.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify after expiry = %v, %v; want false, nil without I/O", ok, err)
	}
	if err := h.KeepAlive(context.Background()); !errors.Is(err, ErrExpired) {
		t.Fatalf("KeepAlive after expiry = %v, want ErrExpired", err)
	}
	if h.Done() != done || h.Context() != hctx {
		t.Fatal("Done and Context must be fixed for the lease's life")
	}
}

// TestExtendTTLInvalid: ExtendTTL below 1ms fails before any I/O and leaves the lease as it was.
func TestExtendTTLInvalid(t *testing.T) {
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := granted(t, ls, time.Hour, time.Now())
	deadline := h.Deadline()
	for _, ttl := range []time.Duration{0, 999 * time.Microsecond, -time.Second} {
		ok, err := h.ExtendTTL(context.Background(), ttl)
		if ok || !errors.Is(err, ErrInvalidTTL) {
			t.Fatalf("ExtendTTL(%v) = %v, %v; want false, ErrInvalidTTL", ttl, ok, err)
		}
		if errors.Is(err, ErrUncertain) {
			t.Fatalf("ExtendTTL(%v) error %v is marked uncertain", ttl, err)
		}
	}
	if h.Err() != nil || !h.Deadline().Equal(deadline) || h.TTL() != time.Hour {
		t.Fatalf("lease changed: Err=%v Deadline=%v TTL=%v", h.Err(), h.Deadline(), h.TTL())
	}
	if h.b.args[2] != "3600000" || h.b.ms != 3600000 {
		t.Fatalf("extend arguments changed: %q %d", h.b.args[2], h.b.ms)
	}
}

// A failed acquisition attempt sends the owner-checked release behind it exactly when the script may
// have run (luakit.MayHaveApplied): no reply, or an error of unknown kind, not an error reply.
func TestFailedAcquireCleanup(t *testing.T) {
	for _, fw := range replytest.FailedWrites(t) {
		t.Run(fw.Name, func(t *testing.T) {
			c := &replytest.Client{Err: fw.Err}
			ls, err := New(c, WithCleanupTimeout(50*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			if a := ls.cfg.own.Try(context.Background(), "acquire", &ls.newLease("k", "h", "f", 1000).b); !errors.Is(a.Err, fw.Err) {
				t.Fatalf("Try = %v, want %v", a.Err, fw.Err)
			}
			if got := len(c.Sent()) > 1; got != fw.Applied {
				t.Fatalf("sent %q: cleanup %v, want %v", c.Sent(), got, fw.Applied)
			}
		})
	}
}

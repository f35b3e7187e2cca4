package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

func TestNew(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ErrNilClient) || !errors.Is(err, luakit.ErrNilClient) || !strings.HasPrefix(err.Error(), "idempotency: ") {
		t.Fatalf("New(nil) = %v, want an \"idempotency: \" error matching luakit.ErrNilClient", err)
	}
	tests := []struct {
		name string
		opt  Option
		ok   bool
	}{
		{"prefix", WithKeyPrefix("app:"), true},
		{"binary prefix", WithKeyPrefix("\x00\xff{t}"), true},
		{"tracker", WithTracker(luakit.NewTracker()), true},
		{"nil tracker", WithTracker(nil), true},
		{"logger", WithLogger(slog.New(slog.DiscardHandler)), true},
		{"nil logger", WithLogger(nil), true},
		{"retry", WithRetryDelay(time.Millisecond), true},
		{"retry negative", WithRetryDelay(-1), false},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(noIO{}, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New error = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && (!errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "idempotency: ")) {
				t.Fatalf("New error = %v, want an \"idempotency: \" error matching luakit.ErrInvalidConfig", err)
			}
			if tt.ok && s == nil {
				t.Fatal("nil Store without error")
			}
		})
	}
}

const goodToken = "0123456789abcdef0123456789abcdef.1764526000123456"

func TestValidationBeforeIO(t *testing.T) {
	s, err := New(noIO{}, WithKeyPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	begins := []struct {
		name string
		key  string
		ttl  time.Duration
		want error
	}{
		{"empty key", "", time.Second, luakit.ErrEmptyKey},
		{"zero ttl", "k", 0, luakit.ErrInvalidTTL},
		{"sub-ms ttl", "k", 999 * time.Microsecond, luakit.ErrInvalidTTL},
		{"negative ttl", "k", -time.Second, luakit.ErrInvalidTTL},
	}
	for _, tt := range begins {
		t.Run("begin/"+tt.name, func(t *testing.T) {
			_, err := s.TryBegin(ctx, tt.key, tt.ttl, NoFingerprint)
			requireInvalid(t, "TryBegin", err, tt.want)
			_, err = s.Begin(ctx, tt.key, tt.ttl, FingerprintOf(""))
			requireInvalid(t, "Begin", err, tt.want)
		})
	}
	owned := []struct {
		name, key, token string
		want             error
	}{
		{"empty key", "", goodToken, luakit.ErrEmptyKey},
		{"empty token", "k", "", ErrInvalidToken},
		{"no generation", "k", "0123456789abcdef0123456789abcdef", ErrInvalidToken},
		{"zero generation", "k", "0123456789abcdef0123456789abcdef.0", ErrInvalidToken},
		{"negative generation", "k", "0123456789abcdef0123456789abcdef.-5", ErrInvalidToken},
		{"leading zero generation", "k", "0123456789abcdef0123456789abcdef.05", ErrInvalidToken},
		{"short secret", "k", "0123.5", ErrInvalidToken},
		{"upper hex", "k", "0123456789ABCDEF0123456789abcdef.5", ErrInvalidToken},
		{"two dots", "k", "0123456789abcdef0123456789abcdef.5.5", ErrInvalidToken},
	}
	for _, tt := range owned {
		t.Run("owned/"+tt.name, func(t *testing.T) {
			_, err := s.Complete(ctx, tt.key, tt.token, nil, time.Hour)
			requireInvalid(t, "Complete", err, tt.want)
			_, err = s.Abandon(ctx, tt.key, tt.token)
			requireInvalid(t, "Abandon", err, tt.want)
			_, err = s.Extend(ctx, tt.key, tt.token, time.Second)
			requireInvalid(t, "Extend", err, tt.want)
			_, err = s.Claim(tt.key, Attempt{State: Started, OwnerToken: tt.token, Lease: time.Second})
			requireInvalid(t, "Claim", err, tt.want)
		})
	}
	// TTL-like arguments of the owner's calls.
	for _, d := range []time.Duration{0, 999 * time.Microsecond, -time.Second} {
		t.Run("durations/"+d.String(), func(t *testing.T) {
			_, err := s.Complete(ctx, "k", goodToken, nil, d)
			requireInvalid(t, "Complete retention", err, luakit.ErrInvalidTTL)
			_, err = s.Extend(ctx, "k", goodToken, d)
			requireInvalid(t, "Extend lease", err, luakit.ErrInvalidTTL)
			_, err = s.Claim("k", Attempt{State: Started, OwnerToken: goodToken, Lease: d})
			requireInvalid(t, "Claim lease", err, luakit.ErrInvalidTTL)
		})
	}
	for _, st := range []State{0, Completed, InProgress, FingerprintMismatch} {
		t.Run("keepalive state/"+st.String(), func(t *testing.T) {
			c, err := s.Claim("k", Attempt{State: st, OwnerToken: goodToken, Lease: time.Second, Deadline: time.Now()})
			requireInvalid(t, "Claim", err, luakit.ErrInvalidConfig)
			if c != nil {
				t.Error("Claim returned a claim with an error")
			}
		})
	}
	_, err = s.Claim("k", Attempt{State: Started, OwnerToken: goodToken, Lease: time.Second})
	requireInvalid(t, "Claim without Deadline", err, luakit.ErrInvalidConfig)
	_, err = s.Inspect(ctx, "")
	requireInvalid(t, "Inspect", err, luakit.ErrEmptyKey)
	if !errors.Is(ErrInvalidToken, luakit.ErrInvalidConfig) {
		t.Error("ErrInvalidToken does not match luakit.ErrInvalidConfig")
	}
}

// requireInvalid asserts that err is an "idempotency: " error matching want and luakit.ErrInvalidConfig.
func requireInvalid(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || !errors.Is(err, luakit.ErrInvalidConfig) {
		t.Errorf("%s error = %v, want %v matching luakit.ErrInvalidConfig", call, err, want)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "idempotency: ") {
		t.Errorf("%s error %q lacks the module prefix", call, err)
	}
}

func TestSharedErrors(t *testing.T) {
	if ErrForeignData != luakit.ErrForeignData || ErrUncertain != luakit.ErrUncertain ||
		ErrNilClient != luakit.ErrNilClient || ErrInvalidTTL != luakit.ErrInvalidTTL {
		t.Error("the shared errors are not luakit's values")
	}
	err := wrap("complete", context.DeadlineExceeded)
	if !errors.Is(err, ErrUncertain) || !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "idempotency: complete: ") {
		t.Errorf("wrap(deadline) = %v, want an \"idempotency: complete: \" error matching ErrUncertain and the cause", err)
	}
	if err := wrap("complete", &rueidis.RedisError{}); errors.Is(err, ErrUncertain) || !strings.HasPrefix(err.Error(), "idempotency: complete: ") {
		t.Errorf("wrap(server error) = %v, want a certain \"idempotency: complete: \" error", err)
	}
}

func TestPrepareTruncates(t *testing.T) {
	s, _ := New(noIO{}, WithKeyPrefix("{t}:"))
	k, ms, err := s.prepare("a", 1900*time.Microsecond)
	if err != nil || k != "{t}:a" || ms != 1 {
		t.Fatalf("prepare = %q, %d, %v; want {t}:a, 1ms", k, ms, err)
	}
}

func TestParseToken(t *testing.T) {
	secret, gen, err := parseToken(goodToken)
	if err != nil || secret != goodToken[:32] || gen != "1764526000123456" {
		t.Fatalf("parseToken = %q %q %v", secret, gen, err)
	}
}

func TestFingerprint(t *testing.T) {
	tests := []struct {
		name string
		fp   Fingerprint
		enc  string
		set  bool
	}{
		{"none", NoFingerprint, "\x00", false},
		{"zero value", Fingerprint{}, "\x00", false},
		{"empty", FingerprintOf(""), "\x01", true},
		{"nul digest", FingerprintOf("\x00"), "\x01\x00", true},
		{"digest", FingerprintOf("abc"), "\x01abc", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fp.encode(); got != tt.enc {
				t.Errorf("encode = %q, want %q", got, tt.enc)
			}
			if _, set := tt.fp.Digest(); set != tt.set {
				t.Errorf("Digest set = %v, want %v", set, tt.set)
			}
		})
	}
	if NoFingerprint == FingerprintOf("") {
		t.Error("no fingerprint equals the empty fingerprint")
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Started: "started", Completed: "completed", InProgress: "in_progress",
		FingerprintMismatch: "fingerprint_mismatch", 0: "State(0)", 9: "State(9)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestScriptsLoaded(t *testing.T) {
	for _, s := range []*luakit.Script{beginScript, extendScript, completeScript, abandonScript, inspectScript} {
		if s.Source() == "" {
			t.Errorf("script %s not loaded", s.Name())
		}
	}
}

func TestEstimate(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		ms   int64
		want time.Duration
	}{
		{1, 500 * time.Microsecond}, {2, time.Millisecond}, {30000, 30*time.Second - time.Millisecond},
	}
	for _, tt := range tests {
		if got := estimate(start, tt.ms).Sub(start); got != tt.want {
			t.Errorf("estimate(%dms) = start + %v, want + %v", tt.ms, got, tt.want)
		}
	}
}

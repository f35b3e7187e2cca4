package rwlock

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
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"cleanup negative", WithCleanupTimeout(-time.Second), false},
		{"retry delay", WithRetryDelay(time.Millisecond), true},
		{"retry delay zero", WithRetryDelay(0), false},
		{"renew fraction", WithRenewFraction(0.5), true},
		{"renew fraction max", WithRenewFraction(0.9), true},
		{"renew fraction zero", WithRenewFraction(0), false},
		{"renew fraction too high", WithRenewFraction(0.95), false},
		{"renew fraction NaN", WithRenewFraction(math.NaN()), false},
		{"tracker", WithTracker(luakit.NewTracker()), true},
		{"nil tracker", WithTracker(nil), true},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), true},
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
			if err != nil && !strings.HasPrefix(err.Error(), "rwlock: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestValidationBeforeIO(t *testing.T) {
	tests := []struct {
		name string
		mode rueidis.ClientMode
		key  string
		ttl  time.Duration
		want error
	}{
		{"empty key", rueidis.ClientModeStandalone, "", time.Second, luakit.ErrEmptyKey},
		{"empty key on cluster", rueidis.ClientModeCluster, "", time.Second, luakit.ErrEmptyKey},
		{"zero ttl", rueidis.ClientModeStandalone, "k", 0, ErrInvalidTTL},
		{"sub-ms ttl", rueidis.ClientModeStandalone, "k", 999 * time.Microsecond, ErrInvalidTTL},
		{"negative ttl", rueidis.ClientModeCluster, "k", -time.Second, ErrInvalidTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(noIO{ClientMode: tt.mode}, WithKeyPrefix("p:"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if lease, err := l.TryAcquireRead(ctx, tt.key, tt.ttl); !errors.Is(err, tt.want) || lease != nil {
				t.Errorf("TryAcquireRead = %v, %v; want nil, %v", lease, err, tt.want)
			}
			if lease, err := l.TryAcquireWrite(ctx, tt.key, tt.ttl); !errors.Is(err, tt.want) || lease != nil {
				t.Errorf("TryAcquireWrite = %v, %v; want nil, %v", lease, err, tt.want)
			}
			if lease, err := l.AcquireRead(ctx, tt.key, tt.ttl); !errors.Is(err, tt.want) || lease != nil {
				t.Errorf("AcquireRead = %v, %v; want nil, %v", lease, err, tt.want)
			}
			if lease, err := l.AcquireWrite(ctx, tt.key, tt.ttl); !errors.Is(err, tt.want) || lease != nil {
				t.Errorf("AcquireWrite = %v, %v; want nil, %v", lease, err, tt.want)
			}
		})
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Read: "read", Write: "write", 0: "Mode(0)"} {
		if got := m.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(m), got, want)
		}
	}
	if Read.tag() != "r" || Write.tag() != "w" {
		t.Errorf("tags = %q, %q; want r, w", Read.tag(), Write.tag())
	}
}

// An acquisition whose ctx already ended sends nothing (noIO would panic) and returns ctx's error,
// not ErrUncertain; a waiting one does the same.
func TestEndedContextBeforeIO(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, acquire := range map[string]func(context.Context, string, time.Duration) (*Lease, error){
		"TryAcquireRead": l.TryAcquireRead, "TryAcquireWrite": l.TryAcquireWrite,
		"AcquireRead": l.AcquireRead, "AcquireWrite": l.AcquireWrite,
	} {
		lease, err := acquire(ctx, "k", time.Second)
		if lease != nil || !errors.Is(err, context.Canceled) || errors.Is(err, ErrUncertain) {
			t.Errorf("%s with an ended ctx = %v, %v; want nil, context.Canceled", name, lease, err)
		}
	}
}

func TestReleaseOutcomeString(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}

// The ownership errors are luakit's shared values, so errors.Is agrees across primitives; the
// module's own errors carry the package prefix.
func TestErrors(t *testing.T) {
	shared := map[error]error{
		ErrNotAcquired: luakit.ErrNotAcquired, ErrLateReply: luakit.ErrLateReply, ErrUncertain: luakit.ErrUncertain,
		ErrLost: luakit.ErrLost, ErrExpired: luakit.ErrExpired, ErrReleased: luakit.ErrReleased,
		ErrKeepAliveRunning: luakit.ErrKeepAliveRunning, ErrInvalidTTL: luakit.ErrInvalidTTL,
		ErrNilClient: luakit.ErrNilClient, ErrInvalidConfig: luakit.ErrInvalidConfig,
	}
	for ours, theirs := range shared {
		if ours != theirs {
			t.Errorf("%q is not luakit's value", ours)
		}
	}
	if _, err := New(nil); !errors.Is(err, luakit.ErrNilClient) || !strings.HasPrefix(err.Error(), "rwlock: ") {
		t.Errorf("New(nil) = %v, want luakit.ErrNilClient with the rwlock: prefix", err)
	}
	// Every bad argument or option matches ErrInvalidConfig, before any I/O.
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		key string
		ttl time.Duration
	}{{"", time.Second}, {"k", 0}, {"k", time.Microsecond}} {
		if _, err := l.TryAcquireWrite(ctx, tt.key, tt.ttl); !errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "rwlock: ") {
			t.Errorf("TryAcquireWrite(%q, %v) = %v, want ErrInvalidConfig", tt.key, tt.ttl, err)
		}
	}
	for _, o := range []Option{WithRenewFraction(0), WithRetryDelay(0), WithCleanupTimeout(0)} {
		if _, err := New(noIO{}, o); !errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "rwlock: ") {
			t.Errorf("New with a bad option = %v, want ErrInvalidConfig", err)
		}
	}
}

func TestScripts(t *testing.T) {
	for _, s := range []*luakit.Script{acquireScript, extendScript, verifyScript, releaseScript} {
		src := s.Source()
		if !strings.HasPrefix(src, "-- "+s.Name()+":") {
			t.Errorf("%s: missing header comment", s.Name())
		}
		for _, want := range []string{"KEYS[1]", "ARGV[1]", "Returns", "O("} {
			if !strings.Contains(src, want) {
				t.Errorf("%s: header lacks %q", s.Name(), want)
			}
		}
		if !strings.Contains(src, "redis.call('TIME')") {
			t.Errorf("%s: must use server time", s.Name())
		}
	}
}

// grant builds a held lease without a server, as an acquisition sent now with ttl would.
func grant(t *testing.T, l *Locker, mode Mode, ttl time.Duration) *Lease {
	t.Helper()
	h := &Lease{b: backend{client: l.client, key: "k", entry: mode.tag() + ":owner"}, mode: mode, key: "k"}
	if err := h.own.Grant(context.Background(), &h.b, &l.cfg.own, time.Now(), ttl); err != nil {
		t.Fatal(err)
	}
	return h
}

// A lease built locally (no server) ends at its local deadline with ErrExpired; Extend, Verify and
// KeepAlive afterwards do no I/O (noIO would panic).
func TestLeaseLocalLifecycle(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := grant(t, l, Write, 20*time.Millisecond)
	if h.Mode() != Write || h.Name() != "k" || h.TTL() != 20*time.Millisecond || h.OwnerToken() != "owner" {
		t.Fatalf("accessors: %v %q %v %q", h.Mode(), h.Name(), h.TTL(), h.OwnerToken())
	}
	if h.Err() != nil || h.Remaining() <= 0 {
		t.Fatalf("fresh lease: Err %v, Remaining %v", h.Err(), h.Remaining())
	}
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the local estimate elapsed")
	}
	if !errors.Is(h.Err(), ErrExpired) || !errors.Is(context.Cause(h.Context()), ErrExpired) {
		t.Fatalf("Err = %v, want ErrExpired", h.Err())
	}
	if h.Remaining() != 0 {
		t.Fatalf("Remaining = %v after expiry", h.Remaining())
	}
	if ok, err := h.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v; want false, nil", ok, err)
	}
	if ok, err := h.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify after expiry = %v, %v; want false, nil", ok, err)
	}
	if err := h.KeepAlive(context.Background()); !errors.Is(err, ErrExpired) {
		t.Fatalf("KeepAlive after expiry = %v, want ErrExpired", err)
	}
}

// ExtendTTL rejects a TTL under 1ms with ErrInvalidTTL before any I/O (noIO would panic) and leaves
// the lease unchanged; a sub-millisecond remainder is truncated (checked on a server by the
// integration suite).
func TestExtendTTLValidation(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := grant(t, l, Read, time.Minute)
	for _, ttl := range []time.Duration{0, 999 * time.Microsecond, -time.Second} {
		if ok, err := h.ExtendTTL(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("ExtendTTL(%v) = %v, %v; want false, ErrInvalidTTL", ttl, ok, err)
		}
	}
	if h.Err() != nil || h.TTL() != time.Minute {
		t.Fatalf("after invalid ExtendTTL: Err %v, TTL %v", h.Err(), h.TTL())
	}
}

// refusing is a standalone client whose every command fails with err.
type refusing struct {
	rueidis.Client
	err error
}

func (c refusing) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c refusing) B() rueidis.Builder       { return rueidis.Builder{} }
func (c refusing) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.NewErrorResult(c.err)
}

// A failed TryAcquire sends the owner-checked release behind it exactly when the script may have run
// (luakit.MayHaveApplied): no reply, or an error of unknown kind, not an error reply.
func TestFailedAcquireCleanup(t *testing.T) {
	for _, fw := range replytest.FailedWrites(t) {
		t.Run(fw.Name, func(t *testing.T) {
			c := &replytest.Client{Err: fw.Err}
			l, err := New(c, WithCleanupTimeout(50*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.TryAcquireWrite(context.Background(), "k", time.Second); !errors.Is(err, fw.Err) {
				t.Fatalf("TryAcquireWrite = %v, want %v", err, fw.Err)
			}
			if got := len(c.Sent()) > 1; got != fw.Applied {
				t.Fatalf("sent %q: cleanup %v, want %v", c.Sent(), got, fw.Applied)
			}
		})
	}
}

// A Close whose release fails returns the error and logs it, also without WithLogger (the default
// logger, not a nil one).
func TestCloseFailureDefaultLogger(t *testing.T) {
	boom := errors.New("ERR refused")
	l, err := New(refusing{err: boom})
	if err != nil {
		t.Fatal(err)
	}
	h := grant(t, l, Read, time.Minute)
	if err := h.Close(); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "rwlock: ") {
		t.Fatalf("Close = %v, want the release's error", err)
	}
	if !errors.Is(h.Err(), ErrReleased) {
		t.Fatalf("Err = %v, want ErrReleased", h.Err())
	}
}

package lease

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a rueidis.Client whose every method except Mode panics: validation tests use it to prove that
// bad input is rejected before any I/O (including the feature probe).
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
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"cleanup negative", WithCleanupTimeout(-time.Second), false},
		{"retry", WithRetryDelay(time.Millisecond), true},
		{"retry zero", WithRetryDelay(0), false},
		{"retry negative", WithRetryDelay(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), false},
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
	if c.cleanupTimeout != time.Second || c.retryDelay != 50*time.Millisecond || c.tracker != nil || c.logger == nil || c.keys.Prefix() != "" {
		t.Fatalf("unexpected defaults: %+v", c)
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
				ls, err := New(noIO{mode: mode}, WithKeyPrefix("p:"))
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				l, err := ls.TryAcquire(ctx, tt.hash, tt.field, tt.ttl)
				if !errors.Is(err, tt.want) || l != nil {
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
	if _, err := ls.Holders(context.Background(), ""); !errors.Is(err, luakit.ErrEmptyKey) {
		t.Errorf("Holders(\"\") = %v, want ErrEmptyKey", err)
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

func TestReleaseOutcomeString(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned", 0: "ReleaseOutcome(0)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}

func TestErrorsArePrefixed(t *testing.T) {
	for _, err := range []error{ErrNotAcquired, ErrExpiringHash, ErrLateReply, ErrUncertain, ErrInvalidTTL, ErrEmptyField, ErrNilClient, ErrLost, ErrExpired, ErrReleased} {
		if !strings.HasPrefix(err.Error(), "lease: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

// msg builds a rueidis.RedisMessage of RESP type typ ('$' bulk string or ':' integer) through the
// exported cache (un)marshal format, since rueidis has no exported constructor.
func msg(t testing.TB, typ byte, s string, n int64) rueidis.RedisMessage {
	t.Helper()
	buf := make([]byte, 7, 7+9+len(s))
	buf = append(buf, typ)
	var l [8]byte
	if typ == ':' {
		binary.BigEndian.PutUint64(l[:], uint64(n))
		buf = append(buf, l[:]...)
	} else {
		binary.BigEndian.PutUint64(l[:], uint64(len(s)))
		buf = append(buf, l[:]...)
		buf = append(buf, s...)
	}
	var m rueidis.RedisMessage
	if err := m.CacheUnmarshalView(buf); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeHolders(t *testing.T) {
	str := func(s string) rueidis.RedisMessage { return msg(t, '$', s, 0) }
	num := func(n int64) rueidis.RedisMessage { return msg(t, ':', "", n) }
	got, err := decodeHolders([]rueidis.RedisMessage{str("b\x00"), num(1500), str("a"), num(-1), str("\xff"), num(0)})
	if err != nil {
		t.Fatal(err)
	}
	want := []Holder{{"a", -1}, {"b\x00", 1500 * time.Millisecond}, {"\xff", 0}}
	if len(got) != len(want) {
		t.Fatalf("decodeHolders = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("decodeHolders[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if h, err := decodeHolders(nil); err != nil || len(h) != 0 {
		t.Fatalf("empty reply = %v, %v", h, err)
	}
	if _, err := decodeHolders([]rueidis.RedisMessage{str("a")}); err == nil {
		t.Fatal("odd reply accepted")
	}
	if _, err := decodeHolders([]rueidis.RedisMessage{num(1), num(1)}); err == nil {
		t.Fatal("integer field accepted")
	}
}

// TestLeaseLocalState covers the handle's local bookkeeping without a server: accessors, the estimate,
// Done on expiry, and Extend / Release refusing I/O once the handle ended for good.
func TestLeaseLocalState(t *testing.T) {
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := newLease(ls, "p:h", "h", "f", "owner", 20*time.Millisecond, time.Now().Add(20*time.Millisecond))
	if h.HashKey() != "h" || h.Field() != "f" || h.OwnerToken() != "owner" || h.TTL() != 20*time.Millisecond {
		t.Fatal("accessors disagree with construction")
	}
	if h.Err() != nil || h.Remaining() <= 0 || h.Deadline().IsZero() {
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

	// A handle that ended for good (here: uncertain) never contacts the server on Extend; noIO would panic.
	h.mu.Lock()
	h.endLocked(ErrUncertain)
	h.mu.Unlock()
	if ok, err := h.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after an uncertain outcome = %v, %v; want false, nil", ok, err)
	}
	// The first final cause wins; the context of an expired period keeps its cause.
	h.mu.Lock()
	h.endLocked(ErrReleased)
	final := h.final
	h.released = true
	h.mu.Unlock()
	if !errors.Is(final, ErrUncertain) {
		t.Fatalf("final = %v, want ErrUncertain", final)
	}
	if o, err := h.Release(context.Background()); o != AlreadyReleased || err != nil {
		t.Fatalf("Release after release = %v, %v; want AlreadyReleased", o, err)
	}
}

func TestLeaseEndedBeforeExpiry(t *testing.T) {
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := newLease(ls, "h", "h", "f", "owner", time.Hour, time.Now().Add(time.Hour))
	h.mu.Lock()
	h.endLocked(ErrLost)
	h.mu.Unlock()
	<-h.Done()
	if !errors.Is(h.Err(), ErrLost) || h.Remaining() != 0 {
		t.Fatalf("Err = %v, Remaining = %v", h.Err(), h.Remaining())
	}
	if ok, err := h.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after loss = %v, %v", ok, err)
	}
}

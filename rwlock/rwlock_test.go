package rwlock

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
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"cleanup negative", WithCleanupTimeout(-time.Second), false},
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
			l, err := New(noIO{mode: tt.mode}, WithKeyPrefix("p:"))
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

func TestReleaseOutcomeString(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned", 0: "ReleaseOutcome(0)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(o), got, want)
		}
	}
}

func TestErrorsPrefixed(t *testing.T) {
	for _, err := range []error{ErrNotAcquired, ErrLateReply, ErrUncertain, ErrInvalidTTL, ErrNilClient, ErrLost, ErrExpired, ErrReleased} {
		if !strings.HasPrefix(err.Error(), "rwlock: ") {
			t.Errorf("%q lacks the package prefix", err)
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

// A handle built locally (no server) ends at its local deadline with ErrExpired; Extend afterwards
// returns false without I/O, and Release after Close is AlreadyReleased without I/O.
func TestLeaseLocalLifecycle(t *testing.T) {
	l, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	h := newLease(l, Write, "k", "k", "owner", "w:owner", 20*time.Millisecond, time.Now().Add(20*time.Millisecond))
	if h.Mode() != Write || h.Key() != "k" || h.TTL() != 20*time.Millisecond || h.OwnerToken() != "owner" {
		t.Fatalf("accessors: %v %q %v %q", h.Mode(), h.Key(), h.TTL(), h.OwnerToken())
	}
	if h.Err() != nil || h.Remaining() <= 0 {
		t.Fatalf("fresh handle: Err %v, Remaining %v", h.Err(), h.Remaining())
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
	if ok, err := h.Extend(context.Background()); ok || err != nil { // noIO would panic on I/O
		t.Fatalf("Extend after expiry = %v, %v; want false, nil", ok, err)
	}
	h.mu.Lock()
	h.released = true // as after Close
	h.mu.Unlock()
	h.Close()
	if out, err := h.Release(context.Background()); out != AlreadyReleased || err != nil {
		t.Fatalf("Release after Close = %v, %v; want AlreadyReleased", out, err)
	}
}

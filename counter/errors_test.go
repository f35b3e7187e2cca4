package counter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

// The conditions every module shares are luakit's values, so one errors.Is works across modules.
func TestSharedErrorsAreLuakits(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want error
	}{
		{"ErrUncertain", ErrUncertain, luakit.ErrUncertain},
		{"ErrNilClient", ErrNilClient, luakit.ErrNilClient},
		{"ErrClosed", ErrClosed, luakit.ErrClosed},
		{"ErrInvalidTTL", ErrInvalidTTL, luakit.ErrInvalidTTL},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want luakit's value", tt.name, tt.got)
		}
	}
	if !errors.Is(ErrNotInteger, luakit.ErrForeignData) {
		t.Error("ErrNotInteger must match luakit.ErrForeignData")
	}
	if !errors.Is(ErrInvalidDelta, luakit.ErrInvalidConfig) {
		t.Error("ErrInvalidDelta must match luakit.ErrInvalidConfig")
	}
	for _, err := range []error{ErrDisconnected, ErrOverflow, ErrNotInteger, ErrInvalidDelta} {
		if !strings.HasPrefix(err.Error(), "counter: ") {
			t.Errorf("%q lacks the module prefix", err)
		}
	}
}

// Every bad option or argument is found before any I/O (noIO panics on I/O), matches
// luakit.ErrInvalidConfig and carries the module's prefix.
func TestInvalidArgumentsMatchInvalidConfig(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		also error // a more specific value the error matches too, or nil
	}{
		{"incr empty key", func() error { _, err := s.IncrementWithExpire(ctx, "", 1, 0); return err }, luakit.ErrEmptyKey},
		{"incr negative ttl", func() error { _, err := s.IncrementWithExpire(ctx, "k", 1, -time.Second); return err }, ErrInvalidTTL},
		{"incr sub-ms ttl", func() error { _, err := s.IncrementWithExpire(ctx, "k", 1, time.Microsecond); return err }, ErrInvalidTTL},
		{"up-to empty key", func() error { _, err := s.IncrementUpTo(ctx, "", 1, 5, 0); return err }, luakit.ErrEmptyKey},
		{"up-to zero delta", func() error { _, err := s.IncrementUpTo(ctx, "k", 0, 5, 0); return err }, ErrInvalidDelta},
		{"up-to negative delta", func() error { _, err := s.IncrementUpTo(ctx, "k", -1, 5, 0); return err }, ErrInvalidDelta},
		{"up-to bad ttl", func() error { _, err := s.IncrementUpTo(ctx, "k", 1, 5, -1); return err }, ErrInvalidTTL},
		{"down-to empty key", func() error { _, err := s.DecrementDownTo(ctx, "", 1, 0); return err }, luakit.ErrEmptyKey},
		{"down-to zero delta", func() error { _, err := s.DecrementDownTo(ctx, "k", 0, 0); return err }, ErrInvalidDelta},
		{"get empty key", func() error { _, err := s.Get(ctx, ""); return err }, luakit.ErrEmptyKey},
		{"get-many empty key", func() error { _, err := s.GetMany(ctx, []string{"a", ""}); return err }, luakit.ErrEmptyKey},
		{"batch empty key", func() error { _, err := s.BatchIncrement(ctx, []Increment{{Key: "", Delta: 1}}); return err }, luakit.ErrEmptyKey},
		{"batch bad ttl", func() error { _, err := s.BatchIncrement(ctx, []Increment{{Key: "k", Delta: 1, TTL: -1}}); return err }, ErrInvalidTTL},
		{"probe interval", func() error { _, err := New(noIO{}, WithProbeInterval(0)); return err }, nil},
		{"probe timeout", func() error { _, err := New(noIO{}, WithProbeTimeout(-1)); return err }, nil},
		{"buffered nil store", func() error { _, err := NewBuffered(nil, "k"); return err }, nil},
		{"buffered empty key", func() error { _, err := NewBuffered(s, ""); return err }, luakit.ErrEmptyKey},
		{"buffered bad ttl", func() error { _, err := NewBuffered(s, "k", WithFlushTTL(-1)); return err }, ErrInvalidTTL},
		{"buffered negative interval", func() error { _, err := NewBuffered(s, "k", WithFlushInterval(-1)); return err }, nil},
		{"bounded nil store", func() error { _, err := NewBounded(nil, "k", 10); return err }, nil},
		{"bounded empty key", func() error { _, err := NewBounded(s, "", 10); return err }, luakit.ErrEmptyKey},
		{"bounded negative chunk", func() error { _, err := NewBounded(s, "k", 10, WithChunk(-1)); return err }, nil},
		{"bounded zero chunk", func() error { _, err := NewBounded(s, "k", 10, WithChunk(0)); return err }, nil},
		{"bounded negative window", func() error { _, err := NewBounded(s, "k", 10, WithWindow(-time.Second)); return err }, ErrInvalidTTL},
		{"buffered zero interval", func() error { _, err := NewBuffered(s, "k", WithFlushInterval(0)); return err }, nil},
		{"buffered zero timeout", func() error { _, err := NewBuffered(s, "k", WithFlushTimeout(0)); return err }, nil},
		{"buffered sub-ms ttl", func() error { _, err := NewBuffered(s, "k", WithFlushTTL(time.Microsecond)); return err }, ErrInvalidTTL},
		{"try-add zero delta", func() error {
			b, err := NewBounded(s, "k", 10)
			if err != nil {
				return err
			}
			_, err = b.TryAdd(ctx, 0)
			return err
		}, ErrInvalidDelta},
		{"bounded bad window", func() error { _, err := NewBounded(s, "k", 10, WithWindow(time.Microsecond)); return err }, ErrInvalidTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, luakit.ErrInvalidConfig) {
				t.Fatalf("error = %v, want one matching luakit.ErrInvalidConfig", err)
			}
			if tt.also != nil && !errors.Is(err, tt.also) {
				t.Fatalf("error = %v, want one matching %v too", err, tt.also)
			}
			var be *BatchError
			if errors.As(err, &be) {
				err = be.Errs[0]
			}
			if !strings.HasPrefix(err.Error(), "counter: ") || strings.Contains(err.Error(), "luakit:") {
				t.Fatalf("error %q must start with \"counter: \" and not carry another module's prefix", err)
			}
		})
	}
}

// A key holding foreign data (another type, a value that is not a decimal int64) matches
// luakit.ErrForeignData, whether the server said so (INCRBY, WRONGTYPE) or a script reported it in
// its reply.
func TestForeignData(t *testing.T) {
	s := newStore(t, WithProbeInterval(time.Hour))
	bg := context.Background()
	for _, reply := range []string{
		"WRONGTYPE Operation against a key holding the wrong kind of value",
		"ERR value is not an integer or out of range",
	} {
		err := s.fail(bg, "k", true, replytest.Error(t, reply))
		if !errors.Is(err, ErrNotInteger) || !errors.Is(err, luakit.ErrForeignData) || errors.Is(err, ErrUncertain) {
			t.Errorf("fail(%q) = %v, want ErrNotInteger matching ErrForeignData", reply, err)
		}
	}
	foreign := []rueidis.RedisMessage{replytest.Msg(t, -3), replytest.Msg(t, "not_integer")}
	if _, err := decodeBounded(foreign, "limit"); !errors.Is(err, ErrNotInteger) || !errors.Is(err, luakit.ErrForeignData) {
		t.Errorf("decodeBounded(foreign) = %v, want ErrNotInteger", err)
	}
}

// Errors the module passes through from the server or the transport carry its prefix too.
func TestErrorsCarryPrefix(t *testing.T) {
	s := newStore(t, WithProbeInterval(time.Hour))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name  string
		ctx   context.Context
		write bool
		err   error
	}{
		{"noperm reply", context.Background(), true, replytest.Error(t, "NOPERM this user has no permissions")},
		{"cancelled read", cancelled, false, context.Canceled},
		{"cancelled write", cancelled, true, context.Canceled},
	} {
		got := s.fail(tt.ctx, "k", tt.write, tt.err)
		if !strings.HasPrefix(got.Error(), "counter: ") || !errors.Is(got, tt.err) {
			t.Errorf("%s: fail = %q, want a \"counter: \" prefix wrapping %v", tt.name, got, tt.err)
		}
	}
}

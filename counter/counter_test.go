package counter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"syscall"
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

func newStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := New(noIO{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

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
		{"probe interval", WithProbeInterval(time.Millisecond), true},
		{"probe interval zero", WithProbeInterval(0), false},
		{"probe timeout", WithProbeTimeout(time.Second), true},
		{"probe timeout negative", WithProbeTimeout(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), true},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(noIO{}, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New error = %v, want ok=%v", err, tt.ok)
			}
			if s != nil {
				if !s.Connected() {
					t.Fatal("a new store must start connected")
				}
				_ = s.Close(context.Background())
			}
		})
	}
}

func TestBatchValidationPerItem(t *testing.T) {
	s := newStore(t)
	// Every item is invalid, so nothing is sent (noIO would panic).
	vals, err := s.BatchIncrement(context.Background(), []Increment{{Key: "", Delta: 1}, {Key: "k", Delta: 1, TTL: -1}})
	var be *BatchError
	if !errors.As(err, &be) || len(be.Errs) != 2 || len(vals) != 2 {
		t.Fatalf("BatchIncrement = %v, %v; want a BatchError with 2 items", vals, err)
	}
	if !errors.Is(be.Errs[0], luakit.ErrEmptyKey) || !errors.Is(be.Errs[1], ErrInvalidTTL) {
		t.Fatalf("item errors = %v", be.Errs)
	}
	if !errors.Is(err, ErrInvalidTTL) {
		t.Fatal("errors.Is must look through item errors")
	}
	if vals, err := s.BatchIncrement(context.Background(), nil); err != nil || len(vals) != 0 {
		t.Fatalf("empty batch = %v, %v", vals, err)
	}
	if vals, err := s.GetMany(context.Background(), nil); err != nil || len(vals) != 0 {
		t.Fatalf("empty GetMany = %v, %v", vals, err)
	}
}

func TestDisconnectedFailsFastAndClose(t *testing.T) {
	s := newStore(t, WithProbeInterval(time.Hour))
	s.markDown("k")
	if s.Connected() {
		t.Fatal("store must report disconnected")
	}
	ctx := context.Background()
	// noIO panics on any I/O: every call must be refused before touching the client.
	if _, err := s.IncrementWithExpire(ctx, "k", 1, 0); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("IncrementWithExpire = %v", err)
	}
	if _, err := s.IncrementUpTo(ctx, "k", 1, 2, 0); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("IncrementUpTo = %v", err)
	}
	if _, err := s.DecrementDownTo(ctx, "k", 1, 0); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("DecrementDownTo = %v", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("Get = %v", err)
	}
	if _, err := s.GetMany(ctx, []string{"k"}); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("GetMany = %v", err)
	}
	if _, err := s.BatchIncrement(ctx, []Increment{{Key: "k", Delta: 1}}); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("BatchIncrement = %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

func TestFailClassification(t *testing.T) {
	s := newStore(t, WithProbeInterval(time.Hour))
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name            string
		ctx             context.Context
		write           bool
		err             error
		disc, uncertain bool
		is              error
	}{
		{"dial refused write", bg, true, dial, true, false, nil},
		{"reset write", bg, true, read, true, true, nil},
		{"reset read", bg, false, read, true, false, nil},
		{"eof write", bg, true, io.EOF, true, true, nil},
		{"closing", bg, true, rueidis.ErrClosing, true, true, nil},
		{"caller cancelled write", cancelled, true, context.Canceled, false, true, context.Canceled},
		{"caller cancelled read", cancelled, false, context.Canceled, false, false, context.Canceled},
		{"overflow reply", bg, true, fmt.Errorf("wrapped: %w", replytest.Error(t, "ERR increment or decrement would overflow")), false, false, ErrOverflow},
		{"not integer reply", bg, true, replytest.Error(t, "ERR value is not an integer or out of range"), false, false, ErrNotInteger},
		{"wrongtype reply", bg, true, replytest.Error(t, "WRONGTYPE Operation against a key holding the wrong kind of value"), false, false, ErrNotInteger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.healthy.Store(true)
			got := s.fail(tt.ctx, "k", tt.write, tt.err)
			if errors.Is(got, ErrDisconnected) != tt.disc || errors.Is(got, ErrUncertain) != tt.uncertain {
				t.Fatalf("fail = %v; want disconnected=%v uncertain=%v", got, tt.disc, tt.uncertain)
			}
			if tt.disc == s.Connected() {
				t.Fatalf("Connected = %v after %v", s.Connected(), got)
			}
			if tt.is != nil && !errors.Is(got, tt.is) {
				t.Fatalf("fail = %v, want %v", got, tt.is)
			}
		})
	}
}

func TestHeadroom(t *testing.T) {
	hr := []struct{ value, limit, want int64 }{
		{0, 10, 10}, {10, 10, 0}, {11, 10, 0}, {math.MinInt64, math.MaxInt64, math.MaxInt64}, {-5, 5, 10},
	}
	for _, tt := range hr {
		if got := headroomLeft(tt.value, tt.limit); got != tt.want {
			t.Errorf("headroomLeft(%d, %d) = %d, want %d", tt.value, tt.limit, got, tt.want)
		}
	}
}

func TestPTTLDuration(t *testing.T) {
	for in, want := range map[int64]time.Duration{-2: 0, -1: 0, 0: time.Millisecond, 1500: 1500 * time.Millisecond} {
		if got := pttlDuration(in); got != want {
			t.Errorf("pttlDuration(%d) = %v, want %v", in, got, want)
		}
	}
}

func TestBufferedLocal(t *testing.T) {
	s := newStore(t)
	b, err := NewBuffered(s, "k", WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Add overflow = %v", err)
	}
	if err := b.Add(-math.MaxInt64); err != nil || b.Pending() != 0 {
		t.Fatalf("Add = %v, pending %d", err, b.Pending())
	}
	// Pending is 0, so Close flushes nothing and does no I/O.
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
}

func TestBoundedLocal(t *testing.T) {
	s := newStore(t)
	b, err := NewBounded(s, "k", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if b.chunk != 10 {
		t.Fatalf("default chunk = %d, want limit/100", b.chunk)
	}
	if _, err := b.TryAdd(context.Background(), 0); !errors.Is(err, ErrInvalidDelta) {
		t.Fatalf("TryAdd(0) = %v", err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAdd(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryAdd after Close = %v", err)
	}
}

func TestBatchErrorMessage(t *testing.T) {
	e := &BatchError{Errs: []error{nil, ErrOverflow, ErrNotInteger}}
	if got := e.Error(); got != "counter: 2 of 3 batch items failed; item 1: counter: increment would overflow int64" {
		t.Fatalf("Error() = %q", got)
	}
	if !errors.Is(e, ErrNotInteger) || errors.Is(e, ErrUncertain) {
		t.Fatal("errors.Is through items")
	}
}

// FuzzDecodeBounded checks that the limit and floor scripts' reply decoder accepts exactly canonical
// int64 values and never panics; the key's life is never negative and no expiry is NoExpiry.
func FuzzDecodeBounded(f *testing.F) {
	f.Add(int64(1), "9007199254740993", int64(1500))
	f.Add(int64(0), "-9223372036854775808", int64(-2))
	f.Add(int64(1), "007", int64(-1))
	f.Add(int64(1), " 1", int64(0))
	f.Add(int64(1), "5", int64(-1)) // an existing key without expiry: NoExpiry
	f.Fuzz(func(t *testing.T, allowed int64, value string, pttl int64) {
		arr := []rueidis.RedisMessage{replytest.Msg(t, allowed), replytest.Msg(t, value), replytest.Msg(t, pttl)}
		res, err := decodeBounded(arr, "limit")
		want, perr := luakit.ParseInt64(value)
		if (err == nil) != (perr == nil) {
			t.Fatalf("decodeBounded(%q) err = %v, ParseInt64 err = %v", value, err, perr)
		}
		if err == nil && (res.Value != want || res.Allowed != (allowed == 1) || res.Remaining < 0 ||
			res.NoExpiry != (pttl == -1) || (res.NoExpiry && res.Remaining != 0)) {
			t.Fatalf("decodeBounded(%q, pttl %d) = %+v", value, pttl, res)
		}
		if _, err := decodeBounded(arr[:2], "floor"); err == nil {
			t.Fatal("a reply without the PTTL accepted")
		}
	})
}

package latch

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
	if _, err := New(nil); !errors.Is(err, ErrNilClient) || !errors.Is(err, luakit.ErrNilClient) || !strings.HasPrefix(err.Error(), "latch: ") {
		t.Fatalf("New(nil) = %v, want a \"latch: \" error matching luakit.ErrNilClient", err)
	}
	tests := []struct {
		name string
		opt  Option
		ok   bool
	}{
		{"prefix", WithKeyPrefix("app:"), true},
		{"binary prefix", WithKeyPrefix("\x00\xff"), true},
		{"recheck", WithRecheckInterval(50 * time.Millisecond), true},
		{"recheck 1ms", WithRecheckInterval(time.Millisecond), true},
		{"recheck zero", WithRecheckInterval(0), false},
		{"recheck sub-ms", WithRecheckInterval(time.Microsecond), false},
		{"recheck negative", WithRecheckInterval(-time.Second), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), true},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := New(noIO{}, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New error = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && (!errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "latch: ")) {
				t.Fatalf("New error = %v, want a \"latch: \" error matching luakit.ErrInvalidConfig", err)
			}
			if tt.ok && ls == nil {
				t.Fatal("nil Latches without error")
			}
		})
	}
}

func TestValidationBeforeIO(t *testing.T) {
	ls, err := New(noIO{ClientMode: rueidis.ClientModeCluster})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name  string
		key   string
		count int64
		opts  []CreateOption
		want  error
	}{
		{"empty key", "", 1, nil, luakit.ErrEmptyKey},
		{"negative count", "k", -1, nil, ErrInvalidCount},
		{"zero expiry", "k", 1, []CreateOption{WithExpiry(0)}, ErrInvalidExpiry},
		{"sub-ms expiry", "k", 1, []CreateOption{WithExpiry(999 * time.Microsecond)}, ErrInvalidExpiry},
		{"negative expiry", "k", 1, []CreateOption{WithExpiry(-time.Second)}, ErrInvalidExpiry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, create := range map[string]func(context.Context, string, int64, ...CreateOption) (*Latch, error){
				"Create": ls.Create, "Reset": ls.Reset,
			} {
				_, err := create(ctx, tt.key, tt.count, tt.opts...)
				if !errors.Is(err, tt.want) || !errors.Is(err, luakit.ErrInvalidConfig) {
					t.Errorf("%s error = %v, want %v matching luakit.ErrInvalidConfig", name, err, tt.want)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "latch: ") {
					t.Errorf("%s error %q lacks the package prefix", name, err)
				}
			}
		})
	}
	if _, err := ls.Join(ctx, ""); !errors.Is(err, luakit.ErrEmptyKey) || !errors.Is(err, luakit.ErrInvalidConfig) {
		t.Errorf("Join(\"\") = %v, want ErrEmptyKey matching luakit.ErrInvalidConfig", err)
	}
	l := &Latch{ls: ls, key: "k", pkey: "k", gen: "1"}
	if err := l.Abort(ctx, strings.Repeat("x", MaxAbortReasonLength+1)); !errors.Is(err, ErrReasonTooLong) {
		t.Errorf("Abort(1025-byte reason) = %v, want ErrReasonTooLong before I/O", err)
	}
	for _, e := range []error{ErrInvalidCount, ErrInvalidExpiry, ErrReasonTooLong} {
		if !errors.Is(e, luakit.ErrInvalidConfig) {
			t.Errorf("%v does not match luakit.ErrInvalidConfig", e)
		}
	}
}

func TestErrors(t *testing.T) {
	err := error(&AbortedError{Reason: "disk \"full\""})
	if !errors.Is(err, ErrAborted) {
		t.Fatal("AbortedError is not ErrAborted")
	}
	if got := err.Error(); got != `latch: generation aborted: "disk \"full\""` {
		t.Fatalf("Error() = %q", got)
	}
	for _, e := range []error{ErrExists, ErrNotFound, ErrCompleted, ErrReplaced, ErrLatchExpired, ErrAborted,
		ErrInvalidCount, ErrInvalidExpiry} {
		if !strings.HasPrefix(e.Error(), "latch: ") {
			t.Errorf("%q lacks the package prefix", e.Error())
		}
	}
	if ErrUncertain != luakit.ErrUncertain || ErrForeignData != luakit.ErrForeignData || ErrNilClient != luakit.ErrNilClient {
		t.Error("the shared errors are not luakit's values")
	}
	if errors.Is(ErrLatchExpired, luakit.ErrExpired) {
		t.Error("ErrLatchExpired (the key's expiry) must not match luakit.ErrExpired (a handle's local estimate)")
	}
	if err := opError("count down", context.DeadlineExceeded); !errors.Is(err, ErrUncertain) || !errors.Is(err, luakit.ErrUncertain) ||
		!errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "latch: count down: ") {
		t.Errorf("opError(deadline) = %v, want a \"latch: count down: \" error matching luakit.ErrUncertain and the cause", err)
	}

	if err := opError("count down", &rueidis.RedisError{}); errors.Is(err, ErrUncertain) {
		t.Errorf("a server error reply is not uncertain: %v", err)
	}
}

func TestOutcome(t *testing.T) {
	l := &Latch{gen: "g1"}
	exp := &Latch{gen: "g1", expiresAtM: 1000}
	tests := []struct {
		name  string
		l     *Latch
		st    state
		final bool
		err   error // nil: completed (when final)
	}{
		{"pending", l, state{kind: "latch", gen: "g1", count: 2}, false, nil},
		{"zero", l, state{kind: "latch", gen: "g1", count: 0}, true, nil},
		{"aborted", l, state{kind: "latch", gen: "g1", count: 1, aborted: true, reason: "r"}, true, ErrAborted},
		{"replaced", l, state{kind: "latch", gen: "g2", count: 3}, true, ErrReplaced},
		{"replaced after completion", l, state{kind: "latch", gen: "g2", count: 3, prevdone: "g1"}, true, nil},
		{"deleted", l, state{kind: "none", now: 5000}, true, ErrReplaced},
		{"other type", l, state{kind: "other"}, true, luakit.ErrForeignData},
		{"gone before the deadline", exp, state{kind: "none", now: 999}, true, ErrReplaced},
		{"expired", exp, state{kind: "none", now: 1000}, true, ErrLatchExpired},
		{"pending expiring", exp, state{kind: "latch", gen: "g1", count: 1, now: 900}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.l.outcome(tt.st)
			if o.final != tt.final || !errors.Is(o.err, tt.err) || (tt.err == nil) != (o.err == nil) {
				t.Fatalf("outcome = %+v, want final=%v err=%v", o, tt.final, tt.err)
			}
			if o.err != nil && !strings.HasPrefix(o.err.Error(), "latch: ") {
				t.Fatalf("outcome error %q lacks the package prefix", o.err)
			}
		})
	}
}

// CountDown reports every way a signal is refused as an error with a zero count, never as an in-band
// value.
func TestCountDownReply(t *testing.T) {
	l := &Latch{gen: "g1"}
	exp := &Latch{gen: "g1", expiresAtM: 1000}
	tests := []struct {
		name  string
		l     *Latch
		reply []rueidis.RedisMessage
		want  int64
		err   error
	}{
		{"decremented", l, replytest.Array(t, "1", "2"), 2, nil},
		{"reached zero", l, replytest.Array(t, "1", "0"), 0, nil},
		{"beyond 2^53", l, replytest.Array(t, "1", "9007199254740995"), 9007199254740995, nil},
		{"replaced", l, replytest.Array(t, "-2"), 0, ErrReplaced},
		{"deleted", l, replytest.Array(t, "-1", "5000"), 0, ErrReplaced},
		{"gone before the deadline", exp, replytest.Array(t, "-1", "999"), 0, ErrReplaced},
		{"expired", exp, replytest.Array(t, "-1", "1000"), 0, ErrLatchExpired},
		{"aborted", l, replytest.Array(t, "-6", "why"), 0, ErrAborted},
		{"completed", l, replytest.Array(t, "-7"), 0, ErrCompleted},
		{"foreign", l, replytest.Array(t, "-3", "foreign"), 0, luakit.ErrForeignData},
		{"negative remaining", l, replytest.Array(t, "1", "-1"), 0, luakit.ErrMalformedInt},
		{"unknown status", l, replytest.Array(t, "7"), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.l.countDownReply(tt.reply)
			if n != tt.want {
				t.Errorf("remaining = %d, want %d", n, tt.want)
			}
			switch {
			case tt.name == "unknown status":
				if err == nil {
					t.Error("an unknown status was accepted")
				}
			case !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil):
				t.Errorf("error = %v, want %v", err, tt.err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "latch: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestDecodeState(t *testing.T) {
	st, err := decodeState(replytest.Array(t, "1", "g", "9007199254740995", "9007199254740996", "1700000000123", "1", "why", "p", "1700000000000"))
	if err != nil {
		t.Fatal(err)
	}
	want := state{kind: "latch", gen: "g", count: 9007199254740995, initial: 9007199254740996, expires: 1700000000123,
		aborted: true, reason: "why", prevdone: "p", now: 1700000000000}
	if st != want {
		t.Fatalf("decodeState = %+v, want %+v", st, want)
	}
	bad := [][]rueidis.RedisMessage{
		replytest.Array(t, "1"),
		replytest.Array(t, "5", "", "", "", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "", "1", "1", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "-1", "1", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "01", "1", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "1", "1", "x", "0", "", "", "1"),
		replytest.Array(t, "-1", "", "", "", "0", "0", "", "", "now"),
	}
	for i, b := range bad {
		if _, err := decodeState(b); err == nil {
			t.Errorf("case %d: decodeState accepted a malformed reply", i)
		}
	}
	// A hash with the latch's fields holding values no latch script writes is foreign data.
	foreign := [][]rueidis.RedisMessage{
		replytest.Array(t, "1", "g", "-1", "1", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "01", "1", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "abc", "1", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "1", "x", "0", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "1", "1", "x", "0", "", "", "1"),
		replytest.Array(t, "1", "g", "1", "1", "-5", "0", "", "", "1"),
	}
	for i, b := range foreign {
		if _, err := decodeState(b); !errors.Is(err, luakit.ErrForeignData) {
			t.Errorf("foreign case %d: decodeState = %v, want luakit.ErrForeignData", i, err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add("1", "g", "3", "5", "0", "0", "", "", "1700000000000")
	f.Add("-1", "", "", "", "0", "0", "", "", "1")
	f.Add("1", "g", "9223372036854775807", "1", "-1", "1", "r", "p", "0")
	f.Fuzz(func(t *testing.T, kind, gen, count, initial, expires, aborted, reason, prevdone, now string) {
		st, err := decodeState(replytest.Array(t, kind, gen, count, initial, expires, aborted, reason, prevdone, now))
		if err != nil {
			return
		}
		if st.kind != "none" && st.kind != "latch" && st.kind != "other" {
			t.Fatalf("accepted kind %q", st.kind)
		}
		if st.kind == "latch" && (st.gen == "" || st.count < 0 || st.initial < 0 || st.expires < 0) {
			t.Fatalf("accepted an invalid latch %+v", st)
		}
		if st.kind == "latch" && luakit.FormatInt64(st.count) != count {
			t.Fatalf("count %q decoded as %d", count, st.count)
		}
	})
}

package lock

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/luakit/replytest"
)

// The fair acquire script's replies, decoded as an attempt's outcome.
func TestDecodeFairAcquire(t *testing.T) {
	cases := []struct {
		name    string
		reply   any
		granted bool
		queued  bool
		busy    bool
		ttl     int64 // HolderTTL in ms when busy
		token   int64
		refusal error
		bad     bool
	}{
		{name: "granted", reply: int64(7), granted: true, token: 7},
		{name: "granted above 2^53", reply: "9007199254740993", granted: true, token: 9007199254740993},
		{name: "queued", reply: []any{int64(0), "queued"}, busy: true, queued: true, ttl: -1},
		{name: "busy held", reply: []any{int64(0), int64(1500)}, busy: true, ttl: 1500},
		{name: "busy without expiry", reply: []any{int64(0), int64(-1)}, busy: true, ttl: -1},
		{name: "busy free with waiters", reply: []any{int64(0), int64(-2)}, busy: true, ttl: -1},
		{name: "counter", reply: []any{int64(-4), "expiring"}, refusal: ErrCounter},
		{name: "zero token", reply: int64(0), bad: true},
		{name: "other string", reply: []any{int64(0), "waiting"}, bad: true},
		{name: "queued with another status", reply: []any{int64(1), "queued"}, bad: true},
		{name: "three elements", reply: []any{int64(0), "", "1-0"}, bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{fair: &fairState{}}
			r, err := b.decodeFair(replytest.Msg(t, tc.reply))
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.granted, r.Granted)
			require.Equal(t, tc.busy, r.Busy)
			require.Equal(t, tc.queued, b.fair.queued)
			if tc.granted {
				require.Equal(t, tc.token, b.token)
			}
			switch {
			case tc.busy && tc.ttl < 0:
				require.Negative(t, r.HolderTTL, "no expiry or unknown")
			case tc.busy:
				require.EqualValues(t, tc.ttl, r.HolderTTL.Milliseconds())
			}
			if tc.refusal != nil {
				require.True(t, errors.Is(r.Err, tc.refusal), "%v", r.Err)
			}
		})
	}
}

func TestRefreshStatus(t *testing.T) {
	cases := []struct {
		name  string
		reply []any
		want  int64
		bad   bool
	}{
		{name: "queued", reply: []any{int64(0)}, want: 0},
		{name: "granted", reply: []any{int64(1), "12"}, want: 1},
		{name: "gone", reply: []any{int64(-1)}, want: -1},
		{name: "counter", reply: []any{int64(-4), "wrongtype"}, want: -4},
		{name: "empty", reply: []any{}, bad: true},
		{name: "granted without token", reply: []any{int64(1)}, bad: true},
		{name: "queued with extra", reply: []any{int64(0), "x"}, bad: true},
		{name: "unknown status", reply: []any{int64(-2)}, bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := refreshStatus(replytest.Array(t, tc.reply...))
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestGrantToken(t *testing.T) {
	cases := []struct {
		name  string
		reply []any
		want  int64
		ok    bool
	}{
		{name: "grant", reply: []any{"{n}:waiter:o:grant", "42:1000"}, want: 42, ok: true},
		{name: "token alone", reply: []any{"{n}:waiter:o:grant", "7"}, want: 7, ok: true},
		{name: "none", reply: nil},
		{name: "key only", reply: []any{"{n}:waiter:o:grant"}},
		{name: "zero", reply: []any{"k", "0:1000"}},
		{name: "negative", reply: []any{"k", "-3:1000"}},
		{name: "malformed", reply: []any{"k", "4x:1000"}},
		{name: "empty", reply: []any{"k", ""}},
		{name: "not a string", reply: []any{"k", int64(42)}},
		{name: "extra element", reply: []any{"k", "42:1000", "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var popped []rueidis.RedisMessage
			if tc.reply != nil {
				popped = replytest.Array(t, tc.reply...)
			}
			got, ok := grantToken(popped)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

// FuzzGrantToken: no popped grant makes the decoder panic, and an accepted grant's token is positive
// and is the element's text before its first colon.
func FuzzGrantToken(f *testing.F) {
	f.Add("42:1000")
	f.Add("7")
	f.Add("x:1")
	f.Fuzz(func(t *testing.T, v string) {
		token, ok := grantToken(replytest.Array(t, "k", v))
		if !ok {
			return
		}
		if token <= 0 {
			t.Fatalf("accepted token %d from %q", token, v)
		}
		head, _, _ := strings.Cut(v, ":")
		if want, err := strconv.ParseInt(head, 10, 64); err != nil || want != token {
			t.Fatalf("token %d from %q (its head parses as %d, %v)", token, v, want, err)
		}
	})
}

// FuzzDecodeFairAcquire: no reply makes the decoder panic, and a grant always carries a positive token.
func FuzzDecodeFairAcquire(f *testing.F) {
	f.Add(int64(0), "queued", true)
	f.Add(int64(5), "", false)
	f.Add(int64(-4), "expiring", true)
	f.Fuzz(func(t *testing.T, n int64, s string, row bool) {
		var reply any = n
		if row {
			reply = []any{n, s}
		}
		b := &backend{fair: &fairState{}}
		r, err := b.decodeFair(replytest.Msg(t, reply))
		if err == nil && r.Granted && b.token <= 0 {
			t.Fatalf("granted with token %d", b.token)
		}
	})
}

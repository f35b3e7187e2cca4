package lock

import (
	"errors"
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
		name    string
		entries []rueidis.XRangeEntry
		want    int64
		ok      bool
	}{
		{name: "grant", entries: []rueidis.XRangeEntry{{ID: "1-0", FieldValues: map[string]string{"t": "42", "s": "1000"}}}, want: 42, ok: true},
		{name: "none", entries: nil},
		{name: "not a grant", entries: []rueidis.XRangeEntry{{ID: "1-0", FieldValues: map[string]string{"q": "1"}}}},
		{name: "zero", entries: []rueidis.XRangeEntry{{ID: "1-0", FieldValues: map[string]string{"t": "0"}}}},
		{name: "malformed", entries: []rueidis.XRangeEntry{{ID: "1-0", FieldValues: map[string]string{"t": "4x"}}}},
		{name: "deleted entry", entries: []rueidis.XRangeEntry{{ID: "1-0"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := grantToken(tc.entries)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
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

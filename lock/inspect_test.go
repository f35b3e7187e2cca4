package lock

import (
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit/replytest"
)

// TestDecodeInspection: inspect.lua's replies in the Inspection shape every module shares: Exists,
// Remaining, NoExpiry (never a negative Remaining) and FencingToken; foreign data as ErrForeignData.
func TestDecodeInspection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []any
		want  Inspection
		err   error
	}{
		{"never taken", []any{-1, -2, ""}, Inspection{}, nil},
		{"held", []any{1, 1500, "9007199254740993"}, Inspection{Exists: true, Remaining: 1500 * time.Millisecond, FencingToken: 9007199254740993}, nil},
		{"held without expiry", []any{1, -1, "7"}, Inspection{Exists: true, NoExpiry: true, FencingToken: 7}, nil},
		{"free, counter kept", []any{-1, -2, "7"}, Inspection{FencingToken: 7}, nil},
		{"wrong type", []any{-3, -2, ""}, Inspection{}, ErrForeignData},
		{"malformed fence", []any{-1, -2, "x"}, Inspection{}, ErrForeignData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeInspection(replytest.Array(t, tc.reply...))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

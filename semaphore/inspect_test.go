package semaphore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/redis/rueidis"
)

// TestDecodeInspection: every reply shape of inspect.lua, and the foreign or malformed ones.
func TestDecodeInspection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply []any
		want  Inspection
		err   error // errors.Is target; nil: no error
	}{
		{"absent", []any{-1}, Inspection{}, nil},
		{"no permits", []any{1, "3", 0}, Inspection{Found: true, Capacity: 3, Free: 3}, nil},
		{"two permits, one without expiry", []any{1, "3", -1, 1500, -1},
			Inspection{Found: true, Capacity: 3, Free: 1, Remaining: Forever, Permits: []time.Duration{1500 * time.Millisecond, Forever}}, nil},
		{"more permits than capacity", []any{1, "1", 900, 100, 200},
			Inspection{Found: true, Capacity: 1, Free: 0, Remaining: 900 * time.Millisecond, Permits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}}, nil},
		{"wrong type", []any{-3}, Inspection{}, ErrForeignData},
		{"former absent status", []any{0}, Inspection{}, errAny},
		{"capacity zero", []any{1, "0", 0}, Inspection{}, ErrForeignData},
		{"capacity not a number", []any{1, "x", 0}, Inspection{}, ErrForeignData},
		{"short reply", []any{1, "3"}, Inspection{}, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := msg(t, tc.reply, 0)
			arr, err := m.ToArray()
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeInspection(arr)
			switch {
			case tc.err == errAny && err != nil:
				return
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got.Found != tc.want.Found || got.Capacity != tc.want.Capacity || got.Free != tc.want.Free ||
				got.Remaining != tc.want.Remaining || len(got.Permits) != len(tc.want.Permits) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got.Permits {
				if got.Permits[i] != tc.want.Permits[i] {
					t.Fatalf("permit %d: %v, want %v", i, got.Permits[i], tc.want.Permits[i])
				}
			}
		})
	}
}

var errAny = errors.New("any error")

// TestInspectValidationBeforeIO: a nil client, an empty key and a bad option fail before any I/O.
func TestInspectValidationBeforeIO(t *testing.T) {
	t.Parallel()
	c := &scripted{answer: func([]string) rueidis.RedisResult { t.Fatal("I/O"); return rueidis.RedisResult{} }}
	if _, err := Inspect(context.Background(), nil, "k"); !errors.Is(err, ErrNilClient) {
		t.Fatalf("nil client: %v", err)
	}
	if _, err := Inspect(context.Background(), c, ""); !errors.Is(err, luakit.ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := Inspect(context.Background(), c, "k", WithCleanupRetryWindow(-time.Second)); !errors.Is(err, luakit.ErrInvalidConfig) {
		t.Fatalf("bad option: %v", err)
	}
}

package semaphore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit/replytest"
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
		{"no permits", []any{1, "3", 0}, Inspection{Exists: true, Capacity: 3, Free: 3}, nil},
		{"two permits, one without expiry", []any{1, "3", -1, 1500, -1},
			Inspection{Exists: true, Capacity: 3, Free: 1, NoExpiry: true,
				Permits: []PermitInspection{{Remaining: 1500 * time.Millisecond}, {NoExpiry: true}}}, nil},
		{"more permits than capacity", []any{1, "1", 900, 100, 200},
			Inspection{Exists: true, Capacity: 1, Free: 0, Remaining: 900 * time.Millisecond,
				Permits: []PermitInspection{{Remaining: 100 * time.Millisecond}, {Remaining: 200 * time.Millisecond}}}, nil},
		{"wrong type", []any{-3}, Inspection{}, ErrForeignData},
		{"former absent status", []any{0}, Inspection{}, errAny},
		{"capacity zero", []any{1, "0", 0}, Inspection{}, ErrForeignData},
		{"capacity not a number", []any{1, "x", 0}, Inspection{}, ErrForeignData},
		{"short reply", []any{1, "3"}, Inspection{}, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := replytest.Msg(t, tc.reply)
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
			if got.Exists != tc.want.Exists || got.Capacity != tc.want.Capacity || got.Free != tc.want.Free ||
				got.Remaining != tc.want.Remaining || got.NoExpiry != tc.want.NoExpiry || len(got.Permits) != len(tc.want.Permits) {
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

// TestInspectIsAMethod: Semaphore.Inspect sends the read-only script on the Semaphore's own key,
// whatever its capacity, and decodes the reply.
func TestInspectIsAMethod(t *testing.T) {
	t.Parallel()
	c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, []any{1, "5", 1200, 1200}) }}
	key := slot0Key(t)
	s, err := New(c, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Inspect(context.Background())
	if err != nil || !in.Exists || in.Capacity != 5 || in.Free != 4 || len(in.Permits) != 1 {
		t.Fatalf("Inspect = %+v, %v", in, err)
	}
	cmds := c.sent()
	if len(cmds) != 1 || !replytest.Runs(cmds[0], inspectScript) || !strings.HasSuffix(cmds[0][0], "_RO") || cmds[0][3] != key {
		t.Fatalf("sent %q; want the read-only inspect script on %q", cmds, key)
	}
}

package rwlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit/replytest"
)

// TestInspectValidationBeforeIO: an empty key fails before any I/O (noIO panics on a command).
func TestInspectValidationBeforeIO(t *testing.T) {
	t.Parallel()
	l, err := New(noIO{ClientMode: rueidis.ClientModeStandalone})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(context.Background(), ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
}

// TestDecodeInspectionExists: Exists is the presence flag, also for a key holding only expired
// entries (Mode 0); an absent key is the zero Inspection.
func TestDecodeInspectionExists(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []any
		want  Inspection
	}{
		{"absent", []any{-1}, Inspection{}},
		{"only expired entries", []any{1, 40, 0}, Inspection{Exists: true, Remaining: 40 * time.Millisecond}},
		{"writer", []any{1, 900, 800}, Inspection{Exists: true, Mode: Write, Writer: 800 * time.Millisecond, Remaining: 900 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeInspection(replytest.Array(t, tc.reply...))
			if err != nil || got.Exists != tc.want.Exists || got.Mode != tc.want.Mode || got.Writer != tc.want.Writer ||
				got.Remaining != tc.want.Remaining || len(got.Readers) != 0 {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := decodeInspection(replytest.Array(t, []any{-3}...)); !errors.Is(err, ErrForeignData) {
		t.Fatalf("foreign: %v", err)
	}
}

package denylist

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInspectionOf is the table of the inspection decoder.
func TestInspectionOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pttl    int64
		members []string
		want    Inspection
		err     bool
	}{
		{"absent", -2, nil, Inspection{}, false},
		{"no expiry, sorted", -1, []string{"b", "a"}, Inspection{Exists: true, Identities: []string{"a", "b"}, NoExpiry: true}, false},
		{"remaining", 1500, []string{"x"}, Inspection{Exists: true, Identities: []string{"x"}, Remaining: 1500 * time.Millisecond}, false},
		{"bad pttl", -3, []string{"x"}, Inspection{}, true},
		{"pttl out of range", maxMillis + 1, []string{"x"}, Inspection{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inspectionOf(tc.pttl, tc.members)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := decodeInspection(nil); err == nil {
		t.Fatal("decodeInspection(nil) succeeded")
	}
}

// FuzzInspectionOf: any PTTL and members decode into a sorted inspection with a non-negative
// Remaining, 0 when NoExpiry, or are rejected, never panicking.
func FuzzInspectionOf(f *testing.F) {
	f.Add(int64(-1), "a", "b")
	f.Add(int64(-2), "", "")
	f.Add(maxMillis+1, "z", "a")
	f.Fuzz(func(t *testing.T, pttl int64, a, b string) {
		got, err := inspectionOf(pttl, []string{a, b})
		if err != nil {
			return
		}
		if got.Exists != (pttl != -2) || got.Remaining < 0 || (got.NoExpiry && got.Remaining != 0) ||
			!slices.IsSorted(got.Identities) {
			t.Fatalf("decoded %+v from %d %q %q", got, pttl, a, b)
		}
	})
}

// TestInspectBeforeIO: Inspect after Close and with a done ctx fails before any I/O.
func TestInspectBeforeIO(t *testing.T) {
	d, err := New(noIOClient{}, "denied")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Inspect(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect with a done ctx = %v", err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Inspect after Close = %v, want ErrClosed", err)
	}
}

// The scripts signal a key of another type with the server's own WRONGTYPE (raised by the set
// command), never with a forged reply.
func TestScriptsDoNotForgeServerErrors(t *testing.T) {
	for _, name := range []string{"denylist_read", "denylist_write", "denylist_entries"} {
		if strings.Contains(mustSource(name), "error_reply('WRONGTYPE") {
			t.Errorf("%s forges a WRONGTYPE reply", name)
		}
	}
}

package ratelimit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestInspectBeforeIO: argument and state errors of the inspection API come before any I/O.
func TestInspectBeforeIO(t *testing.T) {
	k, err := NewKeyed(noIO{}, fw10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Inspect(context.Background(), ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.Inspect(cctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Inspect(context.Background(), "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	l := newTestLimiter(t, noIO{}, "k", fw10)
	if _, err := l.Inspect(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	_ = l.Close(context.Background())
	if _, err := l.Inspect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// TestEntriesOf is the table of the deny-list listing decoder.
func TestEntriesOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pttl    int64
		members []string
		want    []DenyListEntry
		err     bool
	}{
		{"absent", -2, nil, nil, false},
		{"no expiry, sorted", -1, []string{"b", "a"}, []DenyListEntry{{Identity: "a"}, {Identity: "b"}}, false},
		{"ttl", 1500, []string{"x"}, []DenyListEntry{{Identity: "x", TTL: 1500 * time.Millisecond}}, false},
		{"bad pttl", -3, []string{"x"}, nil, true},
		{"pttl out of range", maxMillis + 1, []string{"x"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := entriesOf(tc.pttl, tc.members)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := decodeEntries(nil); err == nil {
		t.Fatal("decodeEntries(nil) succeeded")
	}
}

// FuzzEntriesOf: any PTTL and members decode into sorted entries with one non-negative TTL, or are
// rejected, never panicking.
func FuzzEntriesOf(f *testing.F) {
	f.Add(int64(-1), "a", "b")
	f.Add(int64(-2), "", "")
	f.Add(maxMillis+1, "z", "a")
	f.Fuzz(func(t *testing.T, pttl int64, a, b string) {
		got, err := entriesOf(pttl, []string{a, b})
		if err != nil {
			return
		}
		if len(got) != 2 || got[0].Identity > got[1].Identity || got[0].TTL < 0 || got[0].TTL != got[1].TTL {
			t.Fatalf("decoded %v from %d %q %q", got, pttl, a, b)
		}
	})
}

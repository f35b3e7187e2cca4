package idempotency

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/luakit/hooktest"
)

// TestHooksWithoutIO: every Store operation is admitted first (a rejection returns the hook's error
// unchanged and sends nothing: noIO panics on any command), and an admitted call that fails
// validation completes once as failed. Renewals against a server are in integration/hooks.
func TestHooksWithoutIO(t *testing.T) {
	rec := &hooktest.Recorder{}
	s, err := New(noIO{}, WithHooks(rec), WithInstance("orders"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := []struct {
		op   string
		call func(key string) error
	}{
		{opTryBegin, func(k string) error { _, err := s.TryBegin(ctx, k, time.Second, NoFingerprint); return err }},
		{opBegin, func(k string) error { _, err := s.Begin(ctx, k, time.Second, NoFingerprint); return err }},
		{opComplete, func(k string) error { _, err := s.Complete(ctx, k, "tok", nil, time.Second); return err }},
		{opExtend, func(k string) error { _, err := s.Extend(ctx, k, "tok", time.Second); return err }},
		{opAbandon, func(k string) error { _, err := s.Abandon(ctx, k, "tok"); return err }},
		{opForceAbandon, func(k string) error { _, err := s.ForceAbandon(ctx, k, 1); return err }},
		{opInspect, func(k string) error { _, err := s.Inspect(ctx, k); return err }},
	}
	for _, tc := range calls {
		t.Run(tc.op, func(t *testing.T) {
			rec.RejectAll(true)
			if err := tc.call("k"); err != hooktest.ErrRejected { //nolint:errorlint // returned unchanged
				t.Fatalf("rejected: err = %v, want the hook's error unchanged", err)
			}
			rec.RejectAll(false)
			if err := tc.call(""); err == nil {
				t.Fatal("an empty key was accepted")
			}
			want := []string{"admit " + tc.op + " @orders", "admit " + tc.op + " @orders", "done " + tc.op + " failed"}
			if got := rec.Take(); !slices.Equal(got, want) {
				t.Fatalf("journal %q, want %q", got, want)
			}
		})
	}
}

// TestNoHooksNoAllocs: without hooks, admission allocates nothing (not parallel: AllocsPerRun).
func TestNoHooksNoAllocs(t *testing.T) {
	s, err := New(noIO{}, WithInstance("orders"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Inspect with an empty key is admission, then validation: without hooks it must cost exactly
	// what the validation does.
	none := testing.AllocsPerRun(100, func() { _, sinkErr = s.Inspect(ctx, "") })
	validation := testing.AllocsPerRun(100, func() { sinkErr = validateKey("") })
	if none != validation {
		t.Fatalf("%v allocations without hooks, %v for the validation alone: hooks must add none", none, validation)
	}
}

var sinkErr error

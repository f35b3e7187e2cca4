package latch

import (
	"context"
	"slices"
	"testing"

	"github.com/coordkit/coordkit/luakit/hooktest"
)

// TestHooksWithoutIO: every operation is admitted before anything is sent (noIO panics on any
// command): a rejection returns the hook's error unchanged. Scenarios against a server (one scope
// per Wait) are in integration/hooks.
func TestHooksWithoutIO(t *testing.T) {
	rec := &hooktest.Recorder{}
	rec.RejectAll(true)
	ls, err := New(noIO{}, WithHooks(rec), WithInstance("batch"))
	if err != nil {
		t.Fatal(err)
	}
	l := &Latch{ls: ls, key: "k", pkey: "k", gen: "0123456789abcdef0123456789abcdef", initial: 1}
	ctx := context.Background()
	calls := []struct {
		op   string
		call func() error
	}{
		{opCreate, func() error { _, err := ls.Create(ctx, "k", 1); return err }},
		{opReset, func() error { _, err := ls.Reset(ctx, "k", 1); return err }},
		{opJoin, func() error { _, err := ls.Join(ctx, "k"); return err }},
		{opInspect, func() error { _, err := ls.Inspect(ctx, "k"); return err }},
		{opForceDelete, func() error { _, err := ls.ForceDelete(ctx, "k", l.gen); return err }},
		{opCountDown, func() error { _, err := l.CountDown(ctx); return err }},
		{opCount, func() error { _, err := l.Count(ctx); return err }},
		{opAbort, func() error { return l.Abort(ctx, "why") }},
		{opDelete, func() error { _, err := l.Delete(ctx); return err }},
		{opWait, func() error { return l.Wait(ctx) }},
	}
	for _, tc := range calls {
		if err := tc.call(); err != hooktest.ErrRejected { //nolint:errorlint // returned unchanged
			t.Fatalf("%s: err = %v, want the hook's error unchanged", tc.op, err)
		}
		if got := rec.Take(); !slices.Equal(got, []string{"admit " + tc.op + " @batch"}) {
			t.Fatalf("%s: journal %q", tc.op, got)
		}
	}
	// Admitted: validation failures complete once as failed; a negative count is no answer.
	rec.RejectAll(false)
	if _, err := ls.Create(ctx, "", 1); err == nil {
		t.Fatal("empty key accepted")
	}
	if got := rec.Take(); !slices.Equal(got, []string{"admit LATCH CREATE @batch", "done LATCH CREATE failed"}) {
		t.Fatalf("journal %q", got)
	}
}

// TestNoHooksNoAllocs: without hooks, admission allocates nothing (not parallel: AllocsPerRun).
func TestNoHooksNoAllocs(t *testing.T) {
	ls, err := New(noIO{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	none := testing.AllocsPerRun(100, func() { _, sinkErr = ls.Inspect(ctx, "") })
	validation := testing.AllocsPerRun(100, func() { _, sinkErr = ls.physical("") })
	if none != validation {
		t.Fatalf("%v allocations without hooks, %v for the validation alone: hooks must add none", none, validation)
	}
}

var sinkErr error

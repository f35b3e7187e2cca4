package ratelimit

import (
	"context"
	"errors"
	"slices"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/luakit/hooktest"
)

// These tests use no server: decisions above the capacity and rejected admissions do no I/O (noIO
// panics on any command). The rules against real servers are in integration/hooks.

// TestHooksWithoutIO checks admission order and outcomes on the paths that need no server.
func TestHooksWithoutIO(t *testing.T) {
	ctx := context.Background()
	reads := 0
	rec := &hooktest.Recorder{}
	check := func(context.Context, string) (bool, error) { reads++; return false, nil }
	l := newTestLimiter(t, noIO{}, "k", fw10, WithHooks(rec), WithInstance("api"), withDenyFunc(check, "who"),
		WithQueue(5, OldestFirst))
	k, err := NewKeyed(noIO{}, fw10, WithHooks(rec), WithInstance("per-user"), withKeyedDenyFunc(check),
		WithQueue(5, OldestFirst))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close(ctx) }()

	tests := []struct {
		name   string
		reject string
		call   func() error
		want   []string
	}{
		{"rejected AllowN reads no deny list", opAcquire, func() error { _, err := l.AllowN(ctx, 11); return err },
			[]string{"admit RATE LIMIT ACQUIRE @api"}},
		{"rejected WaitN reads no deny list", opAcquire, func() error { _, err := l.WaitN(ctx, 1); return err },
			[]string{"admit RATE LIMIT ACQUIRE @api"}},
		{"rejected Keyed WaitN creates no key state", opAcquire, func() error { _, err := k.WaitN(ctx, "u", 1); return err },
			[]string{"admit RATE LIMIT ACQUIRE @per-user"}},
		{"rejected Keyed AllowN", opAcquire, func() error { _, err := k.AllowN(ctx, "u", 11); return err },
			[]string{"admit RATE LIMIT ACQUIRE @per-user"}},
		{"rejected Update keeps settings", opUpdate, func() error { return l.Update(ctx, FixedWindow{Limit: 20, Window: fw10.Window}, Adopt) },
			[]string{"admit RATE LIMIT UPDATE @api"}},
		{"rejected Keyed Update", opUpdate, func() error { return k.SetPolicy(ctx, FixedWindow{Limit: 20, Window: fw10.Window}) },
			[]string{"admit RATE LIMIT UPDATE @per-user"}},
		{"rejected Reset", opReset, func() error { return l.Reset(ctx) }, []string{"admit RATE LIMIT RESET @api"}},
		{"rejected Refund", opRefund, func() error { return k.Refund(ctx, "u", 1) }, []string{"admit RATE LIMIT REFUND @per-user"}},
		{"rejected Inspect", opInspect, func() error { _, err := l.Inspect(ctx); return err }, []string{"admit RATE LIMIT INSPECT @api"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reject(tc.reject)
			defer rec.Reject()
			if err := tc.call(); err != hooktest.ErrRejected { //nolint:errorlint // returned unchanged
				t.Fatalf("err = %v, want the hook's error unchanged", err)
			}
			if got := rec.Take(); !slices.Equal(got, tc.want) {
				t.Fatalf("journal %q, want %q", got, tc.want)
			}
			if reads != 0 {
				t.Fatalf("deny list touched: %d reads", reads)
			}
			if k.KeyCount() != 0 || l.Policy() != Policy(fw10) || k.Policy() != Policy(fw10) {
				t.Fatalf("state changed: %d keys, policies %v %v", k.KeyCount(), l.Policy(), k.Policy())
			}
		})
	}

	// Admitted decisions: the limiter's own deny-list check is no DENY LIST READ operation, and a
	// wait ending with ErrExceedsCapacity is a decision, so a success.
	if _, err := l.AllowN(ctx, 11); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitN(ctx, 11); !errors.Is(err, ErrExceedsCapacity) {
		t.Fatal(err)
	}
	if _, err := k.WaitN(ctx, "u", 11); !errors.Is(err, ErrExceedsCapacity) {
		t.Fatal(err)
	}
	if _, err := l.AllowN(ctx, -1); !errors.Is(err, ErrNegativePermits) {
		t.Fatal(err)
	}
	want := []string{
		"admit RATE LIMIT ACQUIRE @api", "done RATE LIMIT ACQUIRE succeeded",
		"admit RATE LIMIT ACQUIRE @api", "done RATE LIMIT ACQUIRE succeeded",
		"admit RATE LIMIT ACQUIRE @per-user", "done RATE LIMIT ACQUIRE succeeded",
		"admit RATE LIMIT ACQUIRE @api", "done RATE LIMIT ACQUIRE failed",
	}
	if got := rec.Take(); !slices.Equal(got, want) {
		t.Fatalf("journal %q\nwant %q", got, want)
	}
	if reads != 3 {
		t.Fatalf("%d deny-list checks, want 3 (AllowN, WaitN and the Keyed WaitN each check once)", reads)
	}
}

// TestNoHooksNoAllocs: without hooks, the public calls allocate exactly what the decision itself
// does (the same path without admission), on a Limiter and on a Keyed (not parallel: AllocsPerRun).
func TestNoHooksNoAllocs(t *testing.T) {
	ctx := context.Background()
	l := newTestLimiter(t, noIO{}, "k", fw10, WithInstance("api"))
	k, err := NewKeyed(noIO{}, fw10)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close(ctx) }()
	for name, calls := range map[string][2]func(){
		"Limiter.AllowN":  {func() { _, _ = l.AllowN(ctx, 11) }, func() { _, _ = l.allowN(ctx, 11) }},
		"Limiter.WaitN":   {func() { _, _ = l.WaitN(ctx, 11) }, func() { _, _ = l.waitN(ctx, 11) }},
		"Keyed.AllowN":    {func() { _, _ = k.AllowN(ctx, "u", 11) }, func() { _, _ = k.allowN(ctx, "u", 11) }},
		"Keyed.SetPolicy": {func() { _ = k.SetPolicy(ctx, fw10) }, func() { _ = k.setPolicy(ctx, fw10) }},
	} {
		public, internal := testing.AllocsPerRun(100, calls[0]), testing.AllocsPerRun(100, calls[1])
		if public != internal {
			t.Errorf("%s: %v allocations without hooks, %v without admission: hooks must add none", name, public, internal)
		}
	}
}

// TestInstanceAttribute: WithInstance adds coordkit.instance to the decision counters.
func TestInstanceAttribute(t *testing.T) {
	for _, name := range []string{"", "api"} {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		l := newTestLimiter(t, noIO{}, "k", fw10, WithMeterProvider(mp), WithInstance(name))
		if _, err := l.AllowN(context.Background(), 11); err != nil {
			t.Fatal(err)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					v, ok := dp.Attributes.Value(AttrInstance)
					if ok != (name != "") || v.AsString() != name {
						t.Fatalf("%s: instance %q (present %v), want %q", m.Name, v.AsString(), ok, name)
					}
					found = true
				}
			}
		}
		if !found {
			t.Fatal("no data points")
		}
		_ = mp.Shutdown(context.Background())
	}
}

// TestRecordAllocatesNothing: counting a decision allocates nothing, with or without an instance
// name (the attribute options are built once, so the variadic Add call builds no slice per call).
// Without hooks an admitted AllowN then allocates what it did before hooks and names existed.
func TestRecordAllocatesNothing(t *testing.T) {
	for _, name := range []string{"", "api"} {
		l := newTestLimiter(t, noIO{}, "k", fw10, WithInstance(name))
		for _, res := range []Result{{Allowed: true}, {Reason: ReasonCapacity}, {Reason: ReasonDenyList}} {
			if n := testing.AllocsPerRun(100, func() { l.m.record(l.st, res) }); n != 0 {
				t.Errorf("name %q, %+v: %v allocations per record", name, res, n)
			}
		}
	}
}

package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
	"github.com/coordkit/coordkit/ratelimit/denylist"
	"github.com/coordkit/coordkit/ratelimit/internal/closetest"
)

// These tests need no server: they cover validation and the local logic (options, the update
// barrier, statistics and metrics of decisions made without I/O). Behaviour against real servers is
// in the integration module (integration/ratelimit, limiter_* scenarios).

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

// blocking is a rueidis.Client whose every command blocks until its context ends and then fails
// with the context's error: an attempt "in flight" for as long as the test wants.
type blocking struct {
	rueidis.Client
	started atomic.Int64
}

func (*blocking) B() rueidis.Builder { return rueidis.Builder{} }

func (c *blocking) Do(ctx context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.started.Add(1)
	<-ctx.Done()
	return rueidis.NewErrorResult(ctx.Err())
}

// slot0Key returns a key in Cluster slot 0: the zero rueidis.Builder that blocking hands out accepts
// only keys of slot 0.
func slot0Key(t *testing.T) string {
	t.Helper()
	for i := 0; ; i++ {
		if k := "rl" + strconv.Itoa(i); luakit.Slot(k) == 0 {
			return k
		}
	}
}

var fw10 = FixedWindow{Limit: 10, Window: time.Second}

func newTestLimiter(t *testing.T, c rueidis.Client, key string, p Policy, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(c, key, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func TestNewValidation(t *testing.T) {
	dl := testDenyList(t)
	tests := []struct {
		name   string
		client rueidis.Client
		key    string
		policy Policy
		opts   []Option
		want   error // nil: any error
		ok     bool
	}{
		{name: "valid", client: noIO{}, key: "k", policy: fw10, ok: true},
		{name: "valid with options", client: noIO{}, key: "k", policy: fw10, ok: true, opts: []Option{
			nil, WithKeyPrefix("p:"), WithQueue(5, NewestFirst), WithMeterProvider(sdkmetric.NewMeterProvider()),
			WithDenyList(dl, "id"),
		}},
		{name: "nil client", key: "k", policy: fw10, want: ErrNilClient},
		{name: "empty key", client: noIO{}, policy: fw10, want: luakit.ErrEmptyKey},
		{name: "invalid policy", client: noIO{}, key: "k", policy: FixedWindow{Limit: 0, Window: time.Second}, want: ErrInvalidPolicy},
		{name: "nil policy", client: noIO{}, key: "k", want: ErrInvalidPolicy},
		{name: "negative queue", client: noIO{}, key: "k", policy: fw10, opts: []Option{WithQueue(-1, OldestFirst)}},
		{name: "unknown order", client: noIO{}, key: "k", policy: fw10, opts: []Option{WithQueue(1, QueueOrder(7))}},
		{name: "nil meter provider: the global one", client: noIO{}, key: "k", policy: fw10, opts: []Option{WithMeterProvider(nil)}, ok: true},
		{name: "empty identity", client: noIO{}, key: "k", policy: fw10, opts: []Option{WithDenyList(dl, "")}, want: ErrEmptyIdentity},
		{name: "nil deny list: none bound", client: noIO{}, key: "k", policy: fw10, opts: []Option{WithDenyList(nil, "")}, ok: true},
		{name: "zero update timeout", client: noIO{}, key: "k", policy: fw10, opts: []Option{WithUpdateTimeout(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.client, tt.key, tt.policy, tt.opts...)
			if tt.ok {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				_ = l.Close(context.Background())
				return
			}
			if err == nil {
				_ = l.Close(context.Background())
				t.Fatal("New succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("New = %v, want %v", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "ratelimit: ") {
				t.Fatalf("New = %q, want the ratelimit: prefix", err)
			}
			// Everything but the nil client is a bad argument found before any I/O.
			if tt.client != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want an error matching ErrInvalidConfig", err)
			}
		})
	}
}

func TestKeyAndPolicy(t *testing.T) {
	comps := []Component{FixedWindow{Limit: 5, Window: time.Second}, TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Second}}
	l := newTestLimiter(t, noIO{}, "k\x00bin", Composite{Components: comps}, WithKeyPrefix("app:"))
	if got := l.Key(); got != "k\x00bin" {
		t.Fatalf("Key = %q, want the key as given, without the prefix", got)
	}
	comps[0] = FixedWindow{Limit: 99, Window: time.Second} // the caller's slice is copied
	p := l.Policy().(Composite)
	if p.Components[0] != (FixedWindow{Limit: 5, Window: time.Second}) {
		t.Fatalf("Policy changed with the caller's slice: %+v", p)
	}
	p.Components[1] = fw10 // and what Policy returns is a copy
	if l.Policy().(Composite).Components[1] == Component(fw10) {
		t.Fatal("Policy returned the limiter's own slice")
	}
}

func TestNegativePermitsBeforeIO(t *testing.T) {
	l := newTestLimiter(t, noIO{}, "k", fw10, WithQueue(5, OldestFirst))
	for name, call := range map[string]func() (Result, error){
		"AllowN": func() (Result, error) { return l.AllowN(context.Background(), -1) },
		"WaitN":  func() (Result, error) { return l.WaitN(context.Background(), -1) },
	} {
		if _, err := call(); !errors.Is(err, ErrNegativePermits) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s(-1) = %v, want ErrNegativePermits matching ErrInvalidConfig", name, err)
		}
	}
	if st := l.Stats(); st != (Stats{Available: -1}) {
		t.Fatalf("errors counted: %+v", st)
	}
}

// A request above the capacity is decided without I/O: a rejection without RetryAfter that counts in
// Stats and in the blocked counter (reason capacity), with or without a queue.
func TestAboveCapacityCounts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	l := newTestLimiter(t, noIO{}, "k", fw10, WithMeterProvider(mp), WithQueue(100, OldestFirst))
	for i, call := range []func(context.Context, int64) (Result, error){l.AllowN, l.WaitN} {
		res, err := call(context.Background(), 11)
		if i == 0 && err != nil || i == 1 && !errors.Is(err, ErrExceedsCapacity) {
			t.Fatal(err)
		}
		if res.Allowed || res.Reason != ReasonCapacity || res.RetryAfter != 0 || res.Limit != 10 || !res.At.IsZero() {
			t.Fatalf("above the capacity: %+v", res)
		}
	}
	if st := l.Stats(); st != (Stats{Rejected: 2, Available: -1}) {
		t.Fatalf("Stats = %+v", st)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != meterName {
			t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				reason, _ := dp.Attributes.Value("reason")
				got[m.Name+"/"+reason.AsString()] += dp.Value
			}
		}
	}
	if want := map[string]int64{MetricBlocked + "/capacity": 2}; len(got) != 1 || got[MetricBlocked+"/capacity"] != 2 {
		t.Fatalf("metrics = %v, want %v", got, want)
	}
}

// Adopt, identical updates and rejected updates do no I/O (noIO would panic).
func TestUpdateWithoutIO(t *testing.T) {
	l := newTestLimiter(t, noIO{}, "k", fw10)
	ctx := context.Background()
	if err := l.Update(ctx, fw10, Migrate); err != nil {
		t.Fatalf("identical Migrate = %v", err)
	}
	if err := l.Update(ctx, FixedWindow{Limit: 10, Window: time.Second - 100*time.Nanosecond}, Migrate); err != nil {
		t.Fatalf("identical after rounding = %v", err)
	}
	for name, tc := range map[string]struct {
		p    Policy
		mode UpdateMode
		want error
	}{
		"invalid":      {FixedWindow{Limit: -1, Window: time.Second}, Migrate, ErrInvalidPolicy},
		"algorithm":    {GCRA{Burst: 10, EmissionInterval: time.Millisecond}, Adopt, ErrInvalidUpdate},
		"unknown mode": {fw10, UpdateMode(9), ErrInvalidUpdate},
		// The zero mode is not Migrate: a caller that forgets the mode must not migrate.
		"zero mode": {FixedWindow{Limit: 20, Window: time.Second}, UpdateMode(0), ErrInvalidUpdate},
	} {
		err := l.Update(ctx, tc.p, tc.mode)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Update = %v, want %v matching ErrInvalidConfig", name, err, tc.want)
		}
	}
	if l.Policy() != Policy(fw10) {
		t.Fatalf("rejected updates changed the policy to %+v", l.Policy())
	}
	next := FixedWindow{Limit: 20, Window: 2 * time.Second}
	if err := l.Update(ctx, next, Adopt); err != nil {
		t.Fatalf("Adopt = %v", err)
	}
	if l.Policy() != Policy(next) {
		t.Fatalf("Policy = %+v after Adopt", l.Policy())
	}
	res, err := l.AllowN(ctx, 21) // the new capacity applies (decided locally)
	if err != nil || res.Limit != 20 {
		t.Fatalf("AllowN(21) = %+v, %v", res, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Update(cancelled, fw10, Adopt); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled ctx = %v", err)
	}
	if l.Policy() != Policy(next) {
		t.Fatal("a cancelled update changed the policy")
	}
}

// The update barrier waits for attempts in flight: an Update whose ctx ends while one is active
// returns the ctx error and keeps the old settings; once the attempt ends, Update proceeds.
func TestUpdateBarrierWaitsForActiveAttempts(t *testing.T) {
	c := &blocking{}
	l := newTestLimiter(t, c, slot0Key(t), fw10)
	actx, stopAttempt := context.WithCancel(context.Background())
	attemptDone := make(chan error, 1)
	go func() {
		_, err := l.AllowN(actx, 1)
		attemptDone <- err
	}()
	for c.started.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, ok := l.IdleDuration(); ok {
		t.Fatal("IdleDuration ok while a call is in progress")
	}
	next := FixedWindow{Limit: 20, Window: time.Second}
	uctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Update(uctx, next, Adopt); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update while an attempt is active = %v, want DeadlineExceeded", err)
	}
	if l.Policy() != Policy(fw10) {
		t.Fatal("policy changed by an update that never started")
	}

	updated := make(chan error, 1)
	go func() { updated <- l.Update(context.Background(), next, Adopt) }()
	// While the update waits, new attempts wait too (their ctx ends them here).
	for {
		l.mu.Lock()
		u := l.updating
		l.mu.Unlock()
		if u {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer wcancel()
	if _, err := l.AllowN(wctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AllowN during an update = %v, want DeadlineExceeded", err)
	}
	if got := c.started.Load(); got != 1 {
		t.Fatalf("%d attempts reached the client during the update", got)
	}
	stopAttempt()
	if err := <-attemptDone; err == nil {
		t.Fatal("the blocked attempt succeeded")
	}
	if err := <-updated; err != nil {
		t.Fatalf("Update after the attempt ended = %v", err)
	}
	if l.Policy() != Policy(next) {
		t.Fatalf("Policy = %+v", l.Policy())
	}
	if d, ok := l.IdleDuration(); !ok || d < 0 {
		t.Fatalf("IdleDuration = %v, %v after the calls ended", d, ok)
	}
}

// After Close, calls and updates return ErrClosed; Close is idempotent.
func TestClose(t *testing.T) {
	l, err := New(noIO{}, "k", fw10, WithQueue(3, OldestFirst))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.IdleDuration(); !ok {
		t.Fatal("a new limiter is not idle")
	}
	for range 2 {
		if err := l.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
	ctx := context.Background()
	if _, err := l.AllowN(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllowN after Close = %v", err)
	}
	if _, err := l.WaitN(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitN after Close = %v", err)
	}
	if err := l.Update(ctx, FixedWindow{Limit: 3, Window: time.Second}, Adopt); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update after Close = %v", err)
	}
	if _, err := l.AllowN(ctx, 1); !strings.HasPrefix(err.Error(), "ratelimit: ") {
		t.Fatalf("AllowN after Close = %q, want the ratelimit: prefix", err)
	}
}

// Close waits for the background work (here a stand-in for the queue's goroutine) until its ctx
// ends, then returns an error wrapping ctx.Err(); the limiter is closed either way, and a later Close
// returns nil once the work has ended.
func TestCloseWaitsUntilCtxEnds(t *testing.T) {
	l, err := New(noIO{}, "k", fw10, WithQueue(3, OldestFirst))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	l.pumpWG.Add(1)
	go func() {
		defer l.pumpWG.Done()
		<-release
	}()
	closetest.Waits(t, l.Close, release, func() error { _, err := l.AllowN(context.Background(), 1); return err })
}

func TestResultOf(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name string
		d    decision
		want Result
	}{
		{"allowed", decision{allowed: true, remaining: 3, limit: 5, reset: time.Second, at: at, component: 1},
			Result{Allowed: true, Remaining: 3, Limit: 5, Reset: time.Second, At: at, Component: 1}},
		{"rejected", decision{remaining: 0, limit: 5, retryAfter: 20 * time.Millisecond, at: at},
			Result{Reason: ReasonCapacity, Limit: 5, RetryAfter: 20 * time.Millisecond, At: at}},
		{"above capacity", decision{limit: 5}, Result{Reason: ReasonCapacity, Limit: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resultOf(tt.d); got != tt.want {
				t.Fatalf("resultOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Pointer policies are copied into plain values: the caller's later changes through the pointer
// cannot reach what Policy reports (the settings in force), and Policy's dynamic types are always
// the value types that callers (such as ratelimithttp) switch on.
func TestPolicyPointersCopied(t *testing.T) {
	fw := &FixedWindow{Limit: 5, Window: time.Second}
	l := newTestLimiter(t, noIO{}, "k", fw)
	fw.Limit = 99
	if got := l.Policy(); got != Policy(FixedWindow{Limit: 5, Window: time.Second}) {
		t.Fatalf("New(&FixedWindow): Policy = %#v, want the FixedWindow value given", got)
	}

	tb := &TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Second}
	k, err := NewKeyed(noIO{}, &Composite{Components: []Component{fw, tb}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	tb.Limit = 7
	want := Composite{Components: []Component{FixedWindow{Limit: 99, Window: time.Second}, TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Second}}}
	got, ok := k.Policy().(Composite)
	if !ok || len(got.Components) != 2 || got.Components[0] != want.Components[0] || got.Components[1] != want.Components[1] {
		t.Fatalf("NewKeyed(&Composite{pointers}): Policy = %#v, want %#v", k.Policy(), want)
	}

	if err := l.Update(context.Background(), &FixedWindow{Limit: 6, Window: time.Second}, Adopt); err != nil {
		t.Fatal(err)
	}
	if got := l.Policy(); got != Policy(FixedWindow{Limit: 6, Window: time.Second}) {
		t.Fatalf("Update(&FixedWindow): Policy = %#v", got)
	}
}

// TestPolicyReportsEnforced: Policy reports the settings enforced, every duration rounded up to
// whole microseconds (sub-millisecond and non-integer-millisecond values exact), for a Limiter, a
// Keyed and after Update.
func TestPolicyReportsEnforced(t *testing.T) {
	l := newTestLimiter(t, noIO{}, "k", GCRA{Burst: 4, EmissionInterval: 1500*time.Microsecond + 1})
	if got, want := l.Policy(), (GCRA{Burst: 4, EmissionInterval: 1501 * time.Microsecond}); got != want {
		t.Fatalf("Limiter.Policy() = %v, want %v", got, want)
	}
	if err := l.Update(context.Background(), GCRA{Burst: 4, EmissionInterval: time.Second / 3}, Adopt); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Policy(), (GCRA{Burst: 4, EmissionInterval: 333334 * time.Microsecond}); got != want {
		t.Fatalf("after Update: Policy() = %v, want %v", got, want)
	}
	k, err := NewKeyed(noIO{}, Composite{Components: []Component{
		FixedWindow{Limit: 3, Window: 300 * time.Microsecond},
		&TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: 400*time.Microsecond + 999},
		SlidingWindow{Limit: 2, Window: 1500 * time.Microsecond, Segments: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	want := Composite{Components: []Component{
		FixedWindow{Limit: 3, Window: 300 * time.Microsecond},
		TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: 401 * time.Microsecond},
		SlidingWindow{Limit: 2, Window: 1500 * time.Microsecond, Segments: 3},
	}}
	got, ok := k.Policy().(Composite)
	if !ok || len(got.Components) != 3 {
		t.Fatalf("Keyed.Policy() = %#v", k.Policy())
	}
	for i := range want.Components {
		if got.Components[i] != want.Components[i] {
			t.Fatalf("Keyed.Policy() component %d = %#v, want %#v", i, got.Components[i], want.Components[i])
		}
	}
}

// TestPolicyReportsDefaultSegments: a sliding window given with Segments 0 is enforced with
// DefaultSegments, and Policy reports that count, standalone and inside a composite, for a Limiter,
// a Keyed and after Update; Segments 0 and DefaultSegments are the same settings (an Update from one
// to the other changes nothing).
func TestPolicyReportsDefaultSegments(t *testing.T) {
	sw0 := SlidingWindow{Limit: 5, Window: time.Second}
	sw10 := SlidingWindow{Limit: 5, Window: time.Second, Segments: DefaultSegments}
	l := newTestLimiter(t, noIO{}, "k", sw0)
	if got := l.Policy(); got != Policy(sw10) {
		t.Fatalf("Limiter.Policy() = %#v, want %#v", got, sw10)
	}
	if err := l.Update(context.Background(), sw10, Adopt); err != nil {
		t.Fatal(err)
	}
	if got := l.Policy(); got != Policy(sw10) {
		t.Fatalf("after Update to the same settings: Policy() = %#v", got)
	}
	if err := l.Update(context.Background(), &SlidingWindow{Limit: 6, Window: time.Second}, Adopt); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Policy(), (SlidingWindow{Limit: 6, Window: time.Second, Segments: DefaultSegments}); got != want {
		t.Fatalf("after Update: Policy() = %#v, want %#v", got, want)
	}

	comps := func(sw Component) Composite {
		return Composite{Components: []Component{FixedWindow{Limit: 9, Window: time.Minute}, sw}}
	}
	k, err := NewKeyed(noIO{}, comps(sw0))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	check := func(what string, want Component) {
		t.Helper()
		got, ok := k.Policy().(Composite)
		if !ok || len(got.Components) != 2 || got.Components[1] != want {
			t.Fatalf("%s: Keyed.Policy() = %#v, want component 1 %#v", what, k.Policy(), want)
		}
	}
	check("NewKeyed", sw10)
	before := k.settings.Load()
	if err := k.SetPolicy(context.Background(), comps(&sw10)); err != nil {
		t.Fatal(err)
	}
	if k.settings.Load() != before {
		t.Fatal("Update from Segments 0 to DefaultSegments published new settings")
	}
	if err := k.SetPolicy(context.Background(), comps(SlidingWindow{Limit: 5, Window: 2 * time.Second})); err != nil {
		t.Fatal(err)
	}
	check("after Update", SlidingWindow{Limit: 5, Window: 2 * time.Second, Segments: DefaultSegments})

	lc := newTestLimiter(t, noIO{}, "c", comps(sw0))
	if got, ok := lc.Policy().(Composite); !ok || got.Components[1] != Component(sw10) {
		t.Fatalf("Limiter.Policy() of a composite = %#v", lc.Policy())
	}
}

// testDenyList returns a deny list over a client that must not be used (noIO).
func testDenyList(t *testing.T) *denylist.List {
	t.Helper()
	dl, err := denylist.New(noIO{}, "denied")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dl.Close(context.Background()) })
	return dl
}

// withDenyFunc binds a Limiter to identity on a stand-in deny list check.
func withDenyFunc(check denyFunc, identity string) Option {
	return limiterOption(func(c *config) error { c.deny, c.identity = check, identity; return nil })
}

// withKeyedDenyFunc binds a Keyed to a stand-in deny list check, each key its own identity.
func withKeyedDenyFunc(check denyFunc) KeyedOption {
	return keyedOption(func(c *config) error {
		c.deny, c.identityFor = check, func(k string) string { return k }
		return nil
	})
}

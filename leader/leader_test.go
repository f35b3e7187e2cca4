package leader

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

// failing is a client whose Do answers every command with the next error of errs (the last repeats).
// Its zero-value builder checks that keys are in slot 0, so tests use the name k596 (its keys
// {k596}:lease and {k596}:fence are in slot 0).
type failing struct {
	rueidis.Client
	mu    sync.Mutex
	errs  []error
	calls int
}

func (c *failing) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }

func (c *failing) B() rueidis.Builder { return rueidis.Builder{} }

func (c *failing) Do(_ context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.errs[min(c.calls, len(c.errs)-1)]
	c.calls++
	return rueidis.NewErrorResult(err)
}

func (c *failing) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		ok   bool
	}{
		{"defaults", nil, true},
		{"nil option", []Option{nil}, true},
		{"lease", []Option{WithLeaseDuration(time.Second)}, true},
		{"lease too short", []Option{WithLeaseDuration(9 * time.Millisecond)}, false},
		{"retry", []Option{WithRetryDelay(time.Millisecond)}, true},
		{"retry zero", []Option{WithRetryDelay(0)}, false},
		{"margin", []Option{WithSafetyMargin(time.Second)}, true},
		{"margin zero", []Option{WithSafetyMargin(0)}, true},
		{"margin negative", []Option{WithSafetyMargin(-1)}, false},
		{"margin half lease", []Option{WithLeaseDuration(time.Second), WithSafetyMargin(500 * time.Millisecond)}, false},
		{"cleanup", []Option{WithCleanupTimeout(time.Second)}, true},
		{"cleanup zero", []Option{WithCleanupTimeout(0)}, false},
		{"prefix", []Option{WithKeyPrefix("app:")}, true},
		{"tracker", []Option{WithTracker(luakit.NewTracker())}, true},
		{"logger", []Option{WithLogger(slog.Default())}, true},
		{"nil logger", []Option{WithLogger(nil)}, true},
		{"meter", []Option{WithMeterProvider(sdkmetric.NewMeterProvider())}, true},
		{"nil meter", []Option{WithMeterProvider(nil)}, true},
		{"callbacks", []Option{OnElected(func(context.Context, Term) error { return nil }), OnRevoked(func(Term) {}), OnChange(func(Change) {})}, true},
		{"nil elected", []Option{OnElected(nil)}, true},
		{"nil revoked", []Option{OnRevoked(nil)}, true},
		{"nil observer", []Option{OnChange(nil)}, true},
		{"keys", []Option{WithKeys("l", "f")}, true},
		{"strict", []Option{WithStrictSlots(true)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(noIO{}, "job", tt.opts...)
			if tt.ok != (err == nil) {
				t.Fatalf("New error = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && (!errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "leader: ")) {
				t.Fatalf("error %v does not match luakit.ErrInvalidConfig with the leader: prefix", err)
			}
			if tt.ok && e == nil {
				t.Fatal("nil Election without error")
			}
		})
	}
}

func TestNewValidationBeforeIO(t *testing.T) {
	if _, err := New(nil, "job"); !errors.Is(err, ErrNilClient) || !errors.Is(err, luakit.ErrNilClient) || !strings.HasPrefix(err.Error(), "leader: ") {
		t.Fatalf("New(nil) = %v, want luakit.ErrNilClient with the leader: prefix", err)
	}
	tests := []struct {
		name   string
		mode   rueidis.ClientMode
		prefix string
		elect  string
		opts   []Option
		want   error // nil: accepted
	}{
		{"name", rueidis.ClientModeStandalone, "", "job", nil, nil},
		{"name on cluster", rueidis.ClientModeCluster, "", "job", nil, nil},
		{"empty name", rueidis.ClientModeStandalone, "", "", nil, luakit.ErrEmptyKey},
		{"empty name with keys", rueidis.ClientModeStandalone, "", "", []Option{WithKeys("l", "f")}, luakit.ErrEmptyKey},
		{"name the tag cannot cover", rueidis.ClientModeStandalone, "", "}job", nil, luakit.ErrCrossSlot},
		{"prefix with empty braces", rueidis.ClientModeStandalone, "a{}", "job", nil, luakit.ErrCrossSlot},
		{"keys", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("l", "f")}, nil},
		{"empty lease key", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("", "f")}, luakit.ErrEmptyKey},
		{"empty fence key", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("l", "")}, luakit.ErrEmptyKey},
		{"same key", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("k", "k")}, lock.ErrSameKey},
		{"same key after prefix", rueidis.ClientModeStandalone, "p:", "job", []Option{WithKeys("k", "k")}, lock.ErrSameKey},
		{"cross slot on cluster", rueidis.ClientModeCluster, "", "job", []Option{WithKeys("a", "b")}, luakit.ErrCrossSlot},
		{"cross slot on standalone", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("a", "b")}, nil},
		{"cross slot on standalone, strict", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("a", "b"), WithStrictSlots(true)}, luakit.ErrCrossSlot},
		{"hash tag on cluster", rueidis.ClientModeCluster, "", "job", []Option{WithKeys("{s}:leader", "{s}:fence")}, nil},
		{"hash tag, strict", rueidis.ClientModeStandalone, "", "job", []Option{WithKeys("{s}:leader", "{s}:fence"), WithStrictSlots(true)}, nil},
		{"prefix tag on cluster", rueidis.ClientModeCluster, "{app}:", "job", []Option{WithKeys("a", "b")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(noIO{ClientMode: tt.mode}, tt.elect, append([]Option{WithKeyPrefix(tt.prefix)}, tt.opts...)...)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("New error = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "leader: ") {
				t.Fatalf("New error = %v, want %v matching ErrInvalidConfig with the leader: prefix", err, tt.want)
			}
		})
	}
}

// TestKeys: the election's keys are the lock module's derivation of its name, or those of WithKeys,
// without the prefix; both derived keys share one Cluster slot.
func TestKeys(t *testing.T) {
	e, err := New(noIO{}, "scheduler", WithKeyPrefix("app:"))
	if err != nil {
		t.Fatal(err)
	}
	wl, wf := lock.Keys("scheduler")
	if e.Name() != "scheduler" || e.LeaseKey() != wl || e.FenceKey() != wf || wl != "{scheduler}:lease" || wf != "{scheduler}:fence" {
		t.Fatalf("keys %q, %q, %q", e.Name(), e.LeaseKey(), e.FenceKey())
	}
	if luakit.Slot("app:"+e.LeaseKey()) != luakit.Slot("app:"+e.FenceKey()) {
		t.Fatal("derived keys in two slots")
	}
	e, err = New(noIO{}, "scheduler", WithKeys("sched:leader", "sched:fence"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "scheduler" || e.LeaseKey() != "sched:leader" || e.FenceKey() != "sched:fence" {
		t.Fatalf("keys %q, %q, %q", e.Name(), e.LeaseKey(), e.FenceKey())
	}
}

// TestSharedErrors: the term's causes and the shared conditions are luakit's values.
func TestSharedErrors(t *testing.T) {
	for _, p := range []struct{ leader, shared error }{
		{ErrLost, luakit.ErrLost},
		{ErrExpired, luakit.ErrExpired},
		{ErrReleased, luakit.ErrReleased},
		{ErrInvalidConfig, luakit.ErrInvalidConfig},
		{ErrNilClient, luakit.ErrNilClient},
	} {
		if p.leader != p.shared {
			t.Errorf("%v is not luakit's %v", p.leader, p.shared)
		}
	}
	for _, err := range []error{ErrRunning, ErrNotRunning, ErrCallbackPanic} {
		if !strings.HasPrefix(err.Error(), "leader: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

func sum(t *testing.T, r *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				n += dp.Value
			}
		}
	}
	return n
}

func TestRunErrorClasses(t *testing.T) {
	terminal := errors.New("NOPERM-like unknown failure")
	tests := []struct {
		name     string
		errs     []error
		wantErr  error
		failures int64
	}{
		{"terminal at once", []error{terminal}, terminal, 0},
		{"closed client", []error{rueidis.ErrClosing}, rueidis.ErrClosing, 0},
		{"transient then terminal", []error{rueidis.ErrNoSlot, rueidis.ErrNoSlot, terminal}, terminal, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			c := &failing{errs: tt.errs}
			e, err := New(c, "k596", WithRetryDelay(time.Millisecond), WithMeterProvider(mp))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = e.Run(ctx)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run = %v, want %v", err, tt.wantErr)
			}
			if got := sum(t, reader, MetricAcquireFailures); got != tt.failures {
				t.Fatalf("acquire failures = %d, want %d", got, tt.failures)
			}
			if got := sum(t, reader, MetricChanges); got != 0 {
				t.Fatalf("changes = %d, want 0", got)
			}
			if _, ok := e.Current(); ok {
				t.Fatal("Current reports a term")
			}
		})
	}
}

func TestRunReturnsNilWhenCtxEnds(t *testing.T) {
	c := &failing{errs: []error{rueidis.ErrNoSlot}}
	e, err := New(c, "k596", WithRetryDelay(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	for c.count() < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := e.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestStartStop(t *testing.T) {
	c := &failing{errs: []error{rueidis.ErrNoSlot}}
	e, err := New(c, "k596", WithRetryDelay(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Stop before Start = %v", err)
	}
	if e.Stopped() != nil {
		t.Fatal("Stopped before Start must be nil")
	}
	for range 2 { // restartable
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); !errors.Is(err, ErrRunning) {
			t.Fatalf("second Start = %v, want ErrRunning", err)
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop = %v", err)
		}
	}
	// A terminal error ends the started run; Stop reports it.
	c2 := &failing{errs: []error{errors.New("terminal")}}
	e2, _ := New(c2, "k596")
	if err := e2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-e2.Stopped()
	if err := e2.Stop(context.Background()); err == nil {
		t.Fatal("Stop after a terminal error returned nil")
	}
}

func TestTermZeroValue(t *testing.T) {
	var term Term
	if term.Context().Err() == nil {
		t.Fatal("zero Term context must be cancelled")
	}
	if term.Err() == nil {
		t.Fatal("zero Term Err must be non-nil")
	}
	for s, want := range map[State]string{Elected: "elected", Revoked: "revoked", 0: "State(0)", 7: "State(7)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestNotifierOrderAndPanics(t *testing.T) {
	var (
		mu  sync.Mutex
		got []State
	)
	var panics atomic.Int32
	cfg := defaultConfig()
	cfg.logger = slog.New(slog.DiscardHandler)
	n := newNotifier([]func(Change){
		func(Change) { panics.Add(1); panic("observer bug") },
		func(c Change) {
			time.Sleep(time.Millisecond) // slow observers never block notify
			mu.Lock()
			got = append(got, c.State)
			mu.Unlock()
		},
	}, cfg)
	start := time.Now()
	for i := range 20 {
		n.notify(Change{State: State(i%2 + 1)})
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Fatalf("notify blocked for %v", d)
	}
	n.close()
	if len(got) != 20 || panics.Load() != 20 {
		t.Fatalf("delivered %d, panics %d; want 20, 20", len(got), panics.Load())
	}
	for i, s := range got {
		if s != State(i%2+1) {
			t.Fatalf("change %d = %v, out of order", i, s)
		}
	}
	// No observers: notify is a no-op and close returns at once.
	n2 := newNotifier(nil, cfg)
	n2.notify(Change{State: Elected})
	n2.close()
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{rueidis.ErrNoSlot, true},
		{context.DeadlineExceeded, true},
		{rueidis.ErrClosing, false},
		{errors.New("other"), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestIsLeaderGaugeOnlyWhileRunning: New registers no is-leader callback, and a Run that returned
// (here at once, on a terminal error) leaves none behind, for many Elections on one provider.
func TestIsLeaderGaugeOnlyWhileRunning(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	points := func() int {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == MetricIsLeader {
					n += len(m.Data.(metricdata.Gauge[int64]).DataPoints)
				}
			}
		}
		return n
	}
	for i := range 50 {
		e, err := New(&failing{errs: []error{rueidis.ErrClosing}}, "gauge", WithMeterProvider(mp),
			WithInstance("e"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if n := points(); n != 0 {
			t.Fatalf("after New: %d is-leader points, want 0", n)
		}
		if err := e.Run(context.Background()); !errors.Is(err, rueidis.ErrClosing) {
			t.Fatalf("Run = %v", err)
		}
	}
	if n := points(); n != 0 {
		t.Fatalf("after 50 finished runs: %d is-leader points, want 0", n)
	}
}

package semaphore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a rueidis.Client whose every method except Mode panics: validation tests use it to prove that
// bad input is rejected before any I/O.
type noIO struct {
	rueidis.Client
}

func (noIO) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }

// failing is a rueidis.Client whose every command fails with err (no server needed). It counts calls.
type failing struct {
	rueidis.Client
	err   error
	calls atomic.Int64
}

func (c *failing) B() rueidis.Builder { return rueidis.Builder{} }

func (c *failing) Do(ctx context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.calls.Add(1)
	return rueidis.NewErrorResult(c.err)
}

// slot0Key returns a key in Cluster slot 0: the zero rueidis.Builder that failing hands out accepts
// only keys of slot 0.
func slot0Key(t *testing.T) string {
	t.Helper()
	for i := 0; ; i++ {
		if k := "sem" + strconv.Itoa(i); luakit.Slot(k) == 0 {
			return k
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil, "k", 1); !errors.Is(err, ErrNilClient) {
		t.Fatalf("New(nil) = %v, want ErrNilClient", err)
	}
	if _, err := New(noIO{}, "", 1); !errors.Is(err, luakit.ErrEmptyKey) {
		t.Fatalf("New(empty key) = %v, want ErrEmptyKey", err)
	}
	for _, c := range []int64{0, -1, 1<<53 + 1} {
		if _, err := New(noIO{}, "k", c); !errors.Is(err, ErrInvalidCapacity) {
			t.Errorf("New(capacity %d) = %v, want ErrInvalidCapacity", c, err)
		}
	}
	for _, c := range []int64{1, 1 << 53} {
		if _, err := New(noIO{}, "k", c); err != nil {
			t.Errorf("New(capacity %d) = %v", c, err)
		}
	}
	tests := []struct {
		name string
		opt  Option
		ok   bool
	}{
		{"prefix", WithKeyPrefix("app:"), true},
		{"binary prefix", WithKeyPrefix("\x00\xff{t}"), true},
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"window", WithCleanupRetryWindow(time.Second), true},
		{"window negative", WithCleanupRetryWindow(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), false},
		{"meter provider", WithMeterProvider(sdkmetric.NewMeterProvider()), true},
		{"nil meter provider", WithMeterProvider(nil), false},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(noIO{}, "k", 3, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New(%s) error = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if tt.ok && (s == nil || s.Capacity() != 3 || s.Key() != "k") {
				t.Fatalf("New(%s) = %+v", tt.name, s)
			}
		})
	}
}

func TestKeyPrefix(t *testing.T) {
	s, err := New(noIO{}, "\x00k", 1, WithKeyPrefix("p\xff:"))
	if err != nil {
		t.Fatal(err)
	}
	if s.key != "p\xff:\x00k" || s.Key() != "\x00k" {
		t.Fatalf("key = %q, Key() = %q", s.key, s.Key())
	}
}

func TestValidationBeforeIO(t *testing.T) {
	s, err := New(noIO{}, "k", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ttl := range []time.Duration{-time.Second, -1, 1, 999 * time.Microsecond} {
		if _, err := s.TryAcquire(ctx, ttl); !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("TryAcquire(%v) = %v, want ErrInvalidTTL", ttl, err)
		}
	}
	p := newPermit(s, "owner", time.Second, time.Now())
	defer p.cancel(nil)
	defer p.timer.Stop()
	if ok, err := p.Extend(ctx, time.Microsecond); ok || !errors.Is(err, ErrInvalidTTL) {
		t.Errorf("Extend(1µs) = %v, %v; want ErrInvalidTTL", ok, err)
	}
	if p.IsReleased() || p.Err() != nil {
		t.Error("an invalid Extend changed the handle")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.TryAcquire(cctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire(cancelled) = %v", err)
	}
	if ok, err := p.Extend(cctx, time.Second); ok || !errors.Is(err, context.Canceled) || p.IsReleased() {
		t.Errorf("Extend(cancelled) = %v, %v, released=%v; want the ctx error and no change", ok, err, p.IsReleased())
	}
}

func TestTTLArg(t *testing.T) {
	tests := []struct {
		in   time.Duration
		arg  string
		want time.Duration
	}{
		{NoExpiry, "0", 0},
		{time.Millisecond, "1", time.Millisecond},
		{1500 * time.Microsecond, "1", time.Millisecond},
		{time.Hour, "3600000", time.Hour},
	}
	for _, tt := range tests {
		arg, d, err := ttlArg(tt.in)
		if err != nil || arg != tt.arg || d != tt.want {
			t.Errorf("ttlArg(%v) = %q, %v, %v; want %q, %v", tt.in, arg, d, err, tt.arg, tt.want)
		}
	}
}

func TestCapacityMismatchError(t *testing.T) {
	err := error(&CapacityMismatchError{Stored: 4, Requested: 3})
	if !errors.Is(err, ErrCapacityMismatch) {
		t.Fatal("not ErrCapacityMismatch")
	}
	if got := err.Error(); got != "semaphore: capacity 3 requested but permits are active under capacity 4" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestReleaseOutcomeString(t *testing.T) {
	for o, want := range map[ReleaseOutcome]string{Released: "released", AlreadyReleased: "already_released", NotOwned: "not_owned", 9: "ReleaseOutcome(9)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), want)
		}
	}
}

func TestPermitLocalState(t *testing.T) {
	s, err := New(noIO{}, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := newPermit(s, "owner", NoExpiry, time.Now())
	if p.Remaining() != Forever || !p.Deadline().IsZero() || p.TTL() != NoExpiry || p.Err() != nil {
		t.Fatalf("no-expiry permit: remaining %v deadline %v ttl %v err %v", p.Remaining(), p.Deadline(), p.TTL(), p.Err())
	}
	p.cancel(nil)

	p = newPermit(s, "owner", 20*time.Millisecond, time.Now())
	if r := p.Remaining(); r <= 0 || r > 20*time.Millisecond {
		t.Fatalf("Remaining = %v", r)
	}
	select {
	case <-p.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed after the local estimate elapsed")
	}
	if !errors.Is(p.Err(), ErrExpired) || p.Remaining() != 0 {
		t.Fatalf("after expiry: err %v remaining %v", p.Err(), p.Remaining())
	}
	// Extend after the local estimate elapsed does no I/O (noIO would panic).
	if ok, err := p.Extend(context.Background(), time.Second); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v", ok, err)
	}
}

// abandonedPoints collects the abandoned-cleanup counter's data points as attribute sets → value.
func abandonedPoints(t *testing.T, r *sdkmetric.ManualReader) map[attribute.Distinct]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[attribute.Distinct]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != meterName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != MetricCleanupAbandoned {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || !sum.IsMonotonic {
				t.Fatalf("%s is %T, want a monotonic int64 sum", m.Name, m.Data)
			}
			for _, dp := range sum.DataPoints {
				for _, kv := range dp.Attributes.ToSlice() {
					if kv.Key != "stage" && kv.Key != "reason" {
						t.Errorf("unexpected attribute %q", kv.Key)
					}
				}
				out[dp.Attributes.Equivalent()] += dp.Value
			}
		}
	}
	return out
}

func attrs(stage, reason string) attribute.Distinct {
	set := attribute.NewSet(attribute.String("stage", stage), attribute.String("reason", reason))
	return set.Equivalent()
}

func newFailing(t *testing.T, err error, opts ...Option) (*Semaphore, *failing, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c := &failing{err: err}
	opts = append([]Option{
		WithMeterProvider(mp), WithCleanupTimeout(10 * time.Millisecond),
		WithLogger(slog.New(slog.DiscardHandler)),
	}, opts...)
	s, err := New(c, slot0Key(t), 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, reader
}

func TestCloseAbandonsAfterRetryWindow(t *testing.T) {
	s, c, reader := newFailing(t, io.EOF, WithCleanupRetryWindow(150*time.Millisecond))
	p := newPermit(s, "owner", time.Minute, time.Now())
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	if !p.IsReleased() || !errors.Is(p.Err(), ErrReleased) || p.Remaining() != 0 {
		t.Fatalf("after Close: released %v err %v remaining %v", p.IsReleased(), p.Err(), p.Remaining())
	}
	if err := s.Shutdown(context.Background()); err != nil { // waits for the retries to give up
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("retries gave up after %v, before the window", d)
	}
	if n := c.calls.Load(); n < 2 {
		t.Errorf("%d release attempts, want retries", n)
	}
	got := abandonedPoints(t, reader)
	if got[attrs(stageClose, "uncertain")] != 1 || len(got) != 1 {
		t.Fatalf("abandoned = %v, want one close/uncertain", got)
	}
}

func TestShutdownStopsRetries(t *testing.T) {
	s, _, reader := newFailing(t, io.EOF) // default 1 minute window
	p := newPermit(s, "owner", NoExpiry, time.Now())
	_ = p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if got := abandonedPoints(t, reader); got[attrs(stageClose, "shutdown")] != 1 {
		t.Fatalf("abandoned = %v, want one close/shutdown", got)
	}
	if _, err := s.TryAcquire(context.Background(), time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("TryAcquire after Shutdown = %v", err)
	}
	// After Shutdown an unconfirmed cleanup is abandoned at once.
	_ = newPermit(s, "other", NoExpiry, time.Now()).Close()
	if got := abandonedPoints(t, reader); got[attrs(stageClose, "shutdown")] != 2 {
		t.Fatalf("abandoned = %v, want two close/shutdown", got)
	}
}

// A failed acquisition that is not uncertain (here an "unknown" error) still sends a release, since an
// error reply can follow partial writes, and retries it in the background.
func TestFailedAcquireReleases(t *testing.T) {
	s, c, reader := newFailing(t, errors.New("boom"))
	_, err := s.TryAcquire(context.Background(), time.Second)
	if err == nil || errors.Is(err, ErrUncertain) {
		t.Fatalf("TryAcquire = %v", err)
	}
	if c.calls.Load() < 2 {
		t.Fatalf("%d calls: the failed acquisition sent no release", c.calls.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = s.Shutdown(ctx)
	if got := abandonedPoints(t, reader); got[attrs(stageAcquire, "shutdown")] != 1 {
		t.Fatalf("abandoned = %v, want one acquire/shutdown", got)
	}
}

func TestUncertainAcquire(t *testing.T) {
	s, c, _ := newFailing(t, io.ErrUnexpectedEOF, WithCleanupRetryWindow(30*time.Millisecond))
	p, err := s.TryAcquire(context.Background(), NoExpiry)
	if p != nil || !errors.Is(err, ErrUncertain) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("TryAcquire = %v, %v; want ErrUncertain", p, err)
	}
	if c.calls.Load() < 2 {
		t.Fatal("no cleanup release after an uncertain acquisition")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExtendFailureSurrenders(t *testing.T) {
	s, _, reader := newFailing(t, context.DeadlineExceeded, WithCleanupRetryWindow(30*time.Millisecond))
	p := newPermit(s, "owner", time.Minute, time.Now())
	ok, err := p.Extend(context.Background(), time.Minute)
	if ok || !errors.Is(err, ErrUncertain) {
		t.Fatalf("Extend = %v, %v; want ErrUncertain", ok, err)
	}
	if !p.IsReleased() || p.Remaining() != 0 || !errors.Is(p.Err(), ErrSurrendered) {
		t.Fatalf("after a failed Extend: released %v remaining %v err %v", p.IsReleased(), p.Remaining(), p.Err())
	}
	if ok, err := p.Extend(context.Background(), time.Minute); ok || err != nil {
		t.Fatalf("later Extend = %v, %v; want false, nil", ok, err)
	}
	if ok, err := p.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify after surrender = %v, %v; want false, nil", ok, err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := abandonedPoints(t, reader); got[attrs(stageExtend, "uncertain")] != 1 {
		t.Fatalf("abandoned = %v, want one extend/uncertain", got)
	}
}

func TestVerifyFailureKeepsPermit(t *testing.T) {
	s, _, _ := newFailing(t, io.EOF)
	p := newPermit(s, "owner", time.Minute, time.Now())
	defer p.cancel(nil)
	defer p.timer.Stop()
	ok, err := p.Verify(context.Background())
	if ok || !errors.Is(err, ErrUncertain) {
		t.Fatalf("Verify = %v, %v", ok, err)
	}
	if p.IsReleased() || p.Err() != nil || p.Remaining() == 0 {
		t.Fatal("a failed Verify changed the handle")
	}
}

func TestReleaseUnconfirmed(t *testing.T) {
	s, c, _ := newFailing(t, io.EOF)
	p := newPermit(s, "owner", time.Minute, time.Now())
	_, err := p.Release(context.Background())
	if !errors.Is(err, ErrUncertain) {
		t.Fatalf("Release = %v, want ErrUncertain", err)
	}
	if !p.IsReleased() || !errors.Is(p.Err(), ErrReleased) {
		t.Fatal("Release must end the handle")
	}
	if _, err := p.Release(context.Background()); !errors.Is(err, ErrUncertain) {
		t.Fatalf("retried Release = %v", err)
	}
	if n := c.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want one per Release and no background retry", n)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

package semaphore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/luakit/replytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a client whose every method but Mode panics (see replytest.NoIO): validation tests use it
// to prove that bad input is rejected before any I/O.
type noIO = replytest.NoIO

// failing is a standalone rueidis.Client whose every command fails with err (no server needed). It
// counts calls.
type failing struct {
	rueidis.Client
	err   error
	calls atomic.Int64
}

func (c *failing) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c *failing) B() rueidis.Builder       { return rueidis.Builder{} }
func (c *failing) Do(ctx context.Context, _ rueidis.Completed) rueidis.RedisResult {
	c.calls.Add(1)
	return rueidis.NewErrorResult(c.err)
}

// scripted is a standalone client that records each command and answers it with answer(cmd). A
// cached read (DoCache) is recorded as "CACHED" followed by the command. It has no script cache: the
// SCRIPT LOAD by which luakit learns a script's digest fails and is not recorded, so scripts run
// with EVAL.
type scripted struct {
	rueidis.Client
	answer func(cmd []string) rueidis.RedisResult
	mu     sync.Mutex
	cmds   [][]string
}

func (c *scripted) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c *scripted) B() rueidis.Builder       { return rueidis.Builder{} }
func (c *scripted) Do(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if cmd.Commands()[0] == "SCRIPT" {
		return rueidis.NewErrorResult(errors.New("scripted: no script cache"))
	}
	return c.record(cmd.Commands())
}
func (c *scripted) DoCache(_ context.Context, cmd rueidis.Cacheable, _ time.Duration) rueidis.RedisResult {
	return c.record(append([]string{"CACHED"}, cmd.Commands()...))
}

func (c *scripted) record(cmd []string) rueidis.RedisResult {
	c.mu.Lock()
	c.cmds = append(c.cmds, append([]string(nil), cmd...))
	c.mu.Unlock()
	return c.answer(cmd)
}

func (c *scripted) sent() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]string(nil), c.cmds...)
}

// count returns how many recorded commands ran script s.
func (c *scripted) count(s *luakit.Script) int {
	n := 0
	for _, cmd := range c.sent() {
		if replytest.Runs(cmd, s) {
			n++
		}
	}
	return n
}

// result is a successful call's result carrying the reply v (see replytest.Msg).
func result(t testing.TB, v any) rueidis.RedisResult {
	return rueidis.NewResult(replytest.Msg(t, v), nil)
}

// serverErr returns a server error reply with text s (such as "LOADING ...").
func serverErr(t testing.TB, s string) error { return replytest.Error(t, s) }

// slot0Key returns a key in Cluster slot 0: the zero rueidis.Builder that the fake clients hand out
// accepts only keys of slot 0.
func slot0Key(t *testing.T) string {
	t.Helper()
	for i := 0; ; i++ {
		if k := "sem" + strconv.Itoa(i); luakit.Slot(k) == 0 {
			return k
		}
	}
}

var quiet = WithLogger(slog.New(slog.DiscardHandler))

func TestNew(t *testing.T) {
	if _, err := New(nil, "k", 1); !errors.Is(err, ErrNilClient) || !strings.HasPrefix(err.Error(), "semaphore: ") {
		t.Fatalf("New(nil) = %v, want ErrNilClient", err)
	}
	if _, err := New(noIO{}, "", 1); !errors.Is(err, luakit.ErrEmptyKey) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(empty key) = %v, want ErrEmptyKey", err)
	}
	for _, c := range []int64{0, -1, 1<<53 + 1} {
		if _, err := New(noIO{}, "k", c); !errors.Is(err, ErrInvalidCapacity) || !errors.Is(err, ErrInvalidConfig) {
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
		{"tracker", WithTracker(luakit.NewTracker()), true},
		{"nil tracker: the client's", WithTracker(nil), true},
		{"fraction max", WithRenewFraction(0.9), true},
		{"fraction", WithRenewFraction(0.5), true},
		{"fraction zero", WithRenewFraction(0), false},
		{"fraction too large", WithRenewFraction(0.95), false},
		{"retry", WithRetryDelay(time.Millisecond), true},
		{"retry zero", WithRetryDelay(0), false},
		{"cleanup", WithCleanupTimeout(time.Second), true},
		{"cleanup zero", WithCleanupTimeout(0), false},
		{"window", WithCleanupRetryWindow(time.Second), true},
		{"window negative", WithCleanupRetryWindow(-1), false},
		{"logger", WithLogger(slog.Default()), true},
		{"nil logger", WithLogger(nil), true},
		{"meter provider", WithMeterProvider(sdkmetric.NewMeterProvider()), true},
		{"nil meter provider", WithMeterProvider(nil), true},
		{"nil option", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(noIO{}, "k", 3, tt.opt)
			if tt.ok != (err == nil) {
				t.Fatalf("New(%s) error = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if !tt.ok && (!errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "semaphore: ")) {
				t.Fatalf("New(%s) error = %v, want ErrInvalidConfig with the semaphore: prefix", tt.name, err)
			}
			if tt.ok && (s == nil || s.Capacity() != 3 || s.Key() != "k") {
				t.Fatalf("New(%s) = %+v", tt.name, s)
			}
		})
	}
}

// TestConfig: the options reach the shared ownership configuration (one per Semaphore).
func TestConfig(t *testing.T) {
	tr := luakit.NewTracker()
	s, err := New(noIO{}, "k", 1, WithRenewFraction(0.5), WithRetryDelay(7*time.Millisecond),
		WithCleanupTimeout(3*time.Second), WithTracker(tr), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.own.Name != "semaphore" || s.cfg.own.RenewFraction != 0.5 || s.cfg.own.RetryDelay != 7*time.Millisecond ||
		s.cfg.own.CleanupTimeout != 3*time.Second || s.cfg.own.Logger == nil || s.cfg.own.CheckTTL != nil {
		t.Fatalf("ownership config %+v", s.cfg.own)
	}
	if s.waiter.Config != &s.cfg.own || s.waiter.Tracker != tr || s.waiter.Client != s.client {
		t.Fatal("waiter not wired to the Semaphore's config, tracker and client")
	}
}

func TestKeyPrefix(t *testing.T) {
	s, err := New(noIO{}, "\x00k", 1, WithKeyPrefix("p\xff:"))
	if err != nil {
		t.Fatal(err)
	}
	if s.key != "p\xff:\x00k" || s.Key() != "\x00k" || len(s.keys) != 1 || s.keys[0] != s.key {
		t.Fatalf("key = %q, keys = %q, Key() = %q", s.key, s.keys, s.Key())
	}
}

func TestSharedErrors(t *testing.T) {
	for _, p := range []struct{ own, shared error }{
		{ErrNotAcquired, luakit.ErrNotAcquired},
		{ErrLateReply, luakit.ErrLateReply},
		{ErrUncertain, luakit.ErrUncertain},
		{ErrLost, luakit.ErrLost},
		{ErrExpired, luakit.ErrExpired},
		{ErrReleased, luakit.ErrReleased},
		{ErrKeepAliveRunning, luakit.ErrKeepAliveRunning},
		{ErrInvalidTTL, luakit.ErrInvalidTTL},
		{ErrInvalidConfig, luakit.ErrInvalidConfig},
		{ErrNilClient, luakit.ErrNilClient},
		{ErrClosed, luakit.ErrClosed},
	} {
		if p.own != p.shared {
			t.Errorf("%v is not luakit's %v", p.own, p.shared)
		}
	}
	if Released != ownership.Released || AlreadyReleased != ownership.AlreadyReleased || NotOwned != ownership.NotOwned ||
		Forever != ownership.Forever {
		t.Error("outcomes or Forever differ from ownership's")
	}
}

// noExpiry is the internal TTL of a permit without expiry (what TryAcquireNoExpiry grants).
const noExpiry time.Duration = 0

// grantNow returns a permit granted now on s, released (if held) at the test's end.
func grantNow(t *testing.T, s *Semaphore, owner string, ttl time.Duration) *Permit {
	t.Helper()
	p, err := grant(s, owner, time.Now(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// grant starts a permit of s for owner as if the server had granted an acquisition sent at start
// with ttl; ErrLateReply (after the cleanup) when the estimate already elapsed.
func grant(s *Semaphore, owner string, start time.Time, ttl time.Duration) (*Permit, error) {
	p := s.newPermit("", ttl, 1)
	p.b.owner[0] = owner
	if err := p.b.GrantAcquire(context.Background(), start); err != nil {
		return nil, err
	}
	return p, nil
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
		if _, err := s.Acquire(ctx, ttl); !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("Acquire(%v) = %v, want ErrInvalidTTL", ttl, err)
		}
	}
	p := grantNow(t, s, "owner", time.Second)
	for _, ttl := range []time.Duration{time.Microsecond, -time.Second} {
		if ok, err := p.ExtendTTL(ctx, ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("ExtendTTL(%v) = %v, %v; want ErrInvalidTTL", ttl, ok, err)
		}
	}
	if p.Err() != nil || p.TTL() != time.Second {
		t.Error("an invalid ExtendTTL changed the handle")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.TryAcquire(cctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire(cancelled) = %v", err)
	}
	if _, err := s.Acquire(cctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled) = %v", err)
	}
	if ok, err := p.ExtendTTL(cctx, time.Second); ok || !errors.Is(err, context.Canceled) || p.Err() != nil {
		t.Errorf("ExtendTTL(cancelled) = %v, %v, Err %v; want the ctx error and no change", ok, err, p.Err())
	}
	if _, err := p.Release(cctx); !errors.Is(err, context.Canceled) || p.Err() != nil {
		t.Errorf("Release(cancelled) = %v, Err %v; want the ctx error and no change", err, p.Err())
	}
}

func TestTTLArg(t *testing.T) {
	tests := []struct {
		in   time.Duration
		arg  string
		want time.Duration
	}{
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

// TestZeroTTLIsInvalid: a TTL of 0 (or negative, or below 1ms) is ErrInvalidTTL before any I/O in
// TryAcquire, Acquire and ExtendTTL: a permit without expiry is asked for by name, never by a TTL.
func TestZeroTTLIsInvalid(t *testing.T) {
	s, err := New(noIO{}, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := grantNow(t, s, "owner", time.Minute)
	for _, ttl := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
		if _, _, err := ttlArg(ttl); !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("ttlArg(%v) = %v, want ErrInvalidTTL", ttl, err)
		}
		if q, err := s.TryAcquire(context.Background(), ttl); q != nil || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("TryAcquire(%v) = %v, %v; want ErrInvalidTTL", ttl, q, err)
		}
		if q, err := s.Acquire(context.Background(), ttl); q != nil || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("Acquire(%v) = %v, %v; want ErrInvalidTTL", ttl, q, err)
		}
		if ok, err := p.ExtendTTL(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Errorf("ExtendTTL(%v) = %v, %v; want ErrInvalidTTL", ttl, ok, err)
		}
	}
	if p.NoExpiry() || p.TTL() != time.Minute {
		t.Errorf("the permit changed: NoExpiry %v, TTL %v", p.NoExpiry(), p.TTL())
	}
}

// TestDecodeAcquire: acquire.lua's three reply shapes, and anything else as an error (not uncertain).
func TestDecodeAcquire(t *testing.T) {
	tests := []struct {
		name          string
		reply         []any
		status, value int64
		wait          time.Duration
		ok            bool
	}{
		{"acquired", []any{1, 3}, 1, 3, 0, true},
		{"full", []any{0, 2, 1500}, 0, 2, 1500 * time.Millisecond, true},
		{"full, no expiry", []any{0, 2, -1}, 0, 2, -1, true},
		{"mismatch", []any{-5, "9007199254740992"}, -5, 1 << 53, 0, true},
		{"former mismatch status", []any{-1, "3"}, 0, 0, 0, false},
		{"full without wait", []any{0, 2}, 0, 0, 0, false},
		{"acquired with a third element", []any{1, 3, 5}, 0, 0, 0, false},
		{"bad wait", []any{0, 2, -5}, 0, 0, 0, false},
		{"wait not an integer", []any{0, 2, "x"}, 0, 0, 0, false},
		{"unknown status", []any{2, 1}, 0, 0, 0, false},
		{"short", []any{1}, 0, 0, 0, false},
		{"value malformed", []any{-5, "01"}, 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := replytest.Msg(t, tt.reply)
			arr, err := m.ToArray()
			if err != nil {
				t.Fatal(err)
			}
			status, value, wait, err := decodeAcquire(arr)
			if (err == nil) != tt.ok {
				t.Fatalf("decodeAcquire(%v) error = %v, want ok=%v", tt.reply, err, tt.ok)
			}
			if err != nil {
				if errors.Is(err, ErrUncertain) || luakit.IsUncertain(err) {
					t.Fatalf("an unexpected reply must not be uncertain: %v", err)
				}
				return
			}
			if status != tt.status || value != tt.value || wait != tt.wait {
				t.Fatalf("decodeAcquire(%v) = %d, %d, %v; want %d, %d, %v", tt.reply, status, value, wait, tt.status, tt.value, tt.wait)
			}
		})
	}
}

// TestBackendReplies: the owner-checked scripts' replies, unexpected ones as errors (not uncertain), and
// each sent with the permit's key and owner token.
func TestBackendReplies(t *testing.T) {
	tests := []struct {
		name  string
		call  func(*backend) (bool, error)
		reply int
		held  bool
		ok    bool
	}{
		{"extend renewed", func(b *backend) (bool, error) { return b.Extend(context.Background(), time.Second) }, 1, true, true},
		{"extend not ours", func(b *backend) (bool, error) { return b.Extend(context.Background(), 0) }, -1, false, true},
		{"extend unexpected", func(b *backend) (bool, error) { return b.Extend(context.Background(), time.Second) }, 2, false, false},
		{"verify held", func(b *backend) (bool, error) { return b.Verify(context.Background()) }, 1, true, true},
		{"verify not ours", func(b *backend) (bool, error) { return b.Verify(context.Background()) }, -1, false, true},
		{"verify former remaining", func(b *backend) (bool, error) { return b.Verify(context.Background()) }, 1500, false, false},
		{"verify unexpected", func(b *backend) (bool, error) { return b.Verify(context.Background()) }, 0, false, false},
		{"release removed", func(b *backend) (bool, error) { return b.Release(context.Background()) }, 1, true, true},
		{"release absent", func(b *backend) (bool, error) { return b.Release(context.Background()) }, -1, false, true},
		{"release unexpected", func(b *backend) (bool, error) { return b.Release(context.Background()) }, 3, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, tt.reply) }}
			s, err := New(c, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			b := &backend{s: s, owner: [2]string{"owner", "1"}, weight: 1}
			held, err := tt.call(b)
			if held != tt.held || (err == nil) != tt.ok {
				t.Fatalf("= %v, %v; want %v, ok=%v", held, err, tt.held, tt.ok)
			}
			if err != nil && (errors.Is(err, ErrUncertain) || luakit.IsUncertain(err)) {
				t.Fatalf("an unexpected reply must not be uncertain: %v", err)
			}
			cmd := c.sent()[0]
			if !strings.HasPrefix(cmd[0], "EVAL") || cmd[2] != "1" || cmd[3] != "k" || cmd[4] != "owner" {
				t.Fatalf("sent %q", cmd)
			}
		})
	}
}

// TestExtendTTL: a permit's TTL can change to and from no expiry (ExtendNoExpiry sends 0); TTLs are
// sent in whole milliseconds; Extend renews at the current TTL, keeping a permit without expiry so;
// an invalid TTL is refused before any I/O.
func TestExtendTTL(t *testing.T) {
	c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, 1) }}
	s, err := New(c, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := grantNow(t, s, "owner", time.Minute)
	steps := []struct {
		call func() (bool, error)
		sent string
		ttl  time.Duration
	}{
		{func() (bool, error) { return p.ExtendNoExpiry(context.Background()) }, "0", noExpiry},
		{func() (bool, error) { return p.Extend(context.Background()) }, "0", noExpiry},
		// Truncated to whole milliseconds; long enough that the estimate outlives the next steps.
		{func() (bool, error) { return p.ExtendTTL(context.Background(), 90*time.Second+700*time.Microsecond) }, "90000", 90 * time.Second},
		{func() (bool, error) { return p.ExtendNoExpiry(context.Background()) }, "0", noExpiry},
		{func() (bool, error) { return p.ExtendTTL(context.Background(), time.Hour) }, "3600000", time.Hour},
	}
	for i, st := range steps {
		ok, err := st.call()
		if !ok || err != nil {
			t.Fatalf("step %d = %v, %v", i, ok, err)
		}
		cmds := c.sent()
		if len(cmds) != i+1 || !replytest.Runs(cmds[i], extendScript) || cmds[i][5] != st.sent || p.TTL() != st.ttl {
			t.Fatalf("step %d sent %q, TTL %v; want %s ms, TTL %v", i, cmds[len(cmds)-1], p.TTL(), st.sent, st.ttl)
		}
		if (st.ttl == noExpiry) != (p.Remaining() == Forever) || (st.ttl == noExpiry) != p.Deadline().IsZero() ||
			(st.ttl == noExpiry) != p.NoExpiry() {
			t.Fatalf("step %d: Remaining %v, Deadline %v for TTL %v", i, p.Remaining(), p.Deadline(), st.ttl)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Millisecond, time.Nanosecond, 999 * time.Microsecond} {
		if ok, err := p.ExtendTTL(context.Background(), ttl); ok || !errors.Is(err, ErrInvalidTTL) {
			t.Fatalf("ExtendTTL(%v) = %v, %v; want ErrInvalidTTL", ttl, ok, err)
		}
	}
	if n := len(c.sent()); n != len(steps) {
		t.Fatalf("invalid TTLs sent %d commands", n-len(steps))
	}
}

func TestPermitLocalState(t *testing.T) {
	s, err := New(noIO{}, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := grantNow(t, s, "owner", noExpiry)
	if p.Remaining() != Forever || !p.Deadline().IsZero() || p.TTL() != 0 || !p.NoExpiry() || p.Err() != nil || p.OwnerToken() != "owner" {
		t.Fatalf("no-expiry permit: remaining %v deadline %v ttl %v err %v", p.Remaining(), p.Deadline(), p.TTL(), p.Err())
	}
	// Nothing to renew without expiry: no goroutine, no I/O (noIO would panic).
	if err := p.KeepAlive(context.Background()); err != nil {
		t.Fatalf("KeepAlive without expiry = %v", err)
	}

	p = grantNow(t, s, "owner", 20*time.Millisecond)
	if r := p.Remaining(); r <= 0 || r > 20*time.Millisecond {
		t.Fatalf("Remaining = %v", r)
	}
	done := p.Done()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed after the local estimate elapsed")
	}
	if !errors.Is(p.Err(), ErrExpired) || p.Remaining() != 0 || p.Done() != done {
		t.Fatalf("after expiry: err %v remaining %v", p.Err(), p.Remaining())
	}
	// Extend and Verify after the local estimate elapsed do no I/O (noIO would panic).
	if ok, err := p.ExtendTTL(context.Background(), time.Second); ok || err != nil {
		t.Fatalf("ExtendTTL after expiry = %v, %v", ok, err)
	}
	if ok, err := p.Extend(context.Background()); ok || err != nil {
		t.Fatalf("Extend after expiry = %v, %v", ok, err)
	}
	if ok, err := p.Verify(context.Background()); ok || err != nil {
		t.Fatalf("Verify after expiry = %v, %v", ok, err)
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
					if kv.Key != "stage" && kv.Key != "reason" && kv.Key != AttrInstance {
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
	opts = append([]Option{WithMeterProvider(mp), WithCleanupTimeout(10 * time.Millisecond), quiet}, opts...)
	s, err := New(c, slot0Key(t), 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, reader
}

func TestCloseAbandonsAfterRetryWindow(t *testing.T) {
	s, c, reader := newFailing(t, io.EOF, WithCleanupRetryWindow(150*time.Millisecond))
	p := grantNow(t, s, "owner", time.Minute)
	start := time.Now()
	if err := p.Close(); !errors.Is(err, ErrUncertain) || !errors.Is(err, io.EOF) {
		t.Fatalf("Close = %v, want the first attempt's uncertain error", err)
	}
	if !errors.Is(p.Err(), ErrReleased) || p.Remaining() != 0 {
		t.Fatalf("after Close: err %v remaining %v", p.Err(), p.Remaining())
	}
	if err := s.Close(context.Background()); err != nil { // waits for the retries to give up
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

// TestCloseRetrySettles: a background retry that is answered settles the handle, so a later Close or
// Release does no I/O.
func TestCloseRetrySettles(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	var releases atomic.Int64
	c := &scripted{answer: func([]string) rueidis.RedisResult {
		releases.Add(1)
		if fail.Load() {
			return rueidis.NewErrorResult(io.EOF)
		}
		return result(t, 1)
	}}
	s, err := New(c, slot0Key(t), 2, WithCleanupTimeout(10*time.Millisecond), quiet)
	if err != nil {
		t.Fatal(err)
	}
	p := grantNow(t, s, "owner", time.Minute)
	_ = p.Close()
	fail.Store(false)
	if err := s.Close(context.Background()); err != nil { // waits for the retry to land
		t.Fatal(err)
	}
	n := releases.Load() // the answered background retry settled the handle: no I/O below
	if out, err := p.Release(context.Background()); out != AlreadyReleased || err != nil {
		t.Fatalf("Release after the settled retry = %v, %v; want AlreadyReleased", out, err)
	}
	_ = p.Close()
	if releases.Load() != n {
		t.Fatal("I/O after the handle was settled")
	}
}

// TestCloseStopsRetries: Semaphore.Close waits for the background retries until ctx ends, then stops
// them and returns ctx's error; later acquisitions fail with ErrClosed before any I/O; an unconfirmed
// cleanup after it is abandoned at once; a second Close returns nil.
func TestCloseStopsRetries(t *testing.T) {
	s, c, reader := newFailing(t, io.EOF) // default 1 minute window
	p := grantNow(t, s, "owner", noExpiry)
	_ = p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "semaphore: ") {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if got := abandonedPoints(t, reader); got[attrs(stageClose, reasonClosed)] != 1 {
		t.Fatalf("abandoned = %v, want one close/closed", got)
	}
	calls := c.calls.Load()
	if _, err := s.TryAcquire(context.Background(), time.Second); !errors.Is(err, ErrClosed) || !errors.Is(err, luakit.ErrClosed) || !strings.HasPrefix(err.Error(), "semaphore: ") {
		t.Fatalf("TryAcquire after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Acquire(context.Background(), time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if n := c.calls.Load(); n != calls {
		t.Fatalf("acquisitions after Close sent %d commands", n-calls)
	}
	// After Close an unconfirmed cleanup is abandoned at once.
	_ = grantNow(t, s, "other", noExpiry).Close()
	if got := abandonedPoints(t, reader); got[attrs(stageClose, reasonClosed)] != 2 {
		t.Fatalf("abandoned = %v, want two close/closed", got)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
}

// TestAbandonedInstance: WithInstance adds coordkit.instance to the abandoned-cleanup counter.
func TestAbandonedInstance(t *testing.T) {
	s, _, reader := newFailing(t, io.EOF, WithInstance("pool"))
	_ = grantNow(t, s, "owner", noExpiry).Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = s.Close(ctx)
	got := abandonedPoints(t, reader)
	if len(got) != 1 {
		t.Fatalf("abandoned = %v, want one point", got)
	}
	want := attribute.NewSet(attribute.String("stage", stageClose), attribute.String("reason", reasonClosed),
		attribute.String(AttrInstance, "pool"))
	if got[want.Equivalent()] != 1 {
		t.Fatalf("abandoned = %v, want one close/closed for the instance pool", got)
	}
}

// TestPermitCloseReturnsFirstAttempt: Permit.Close returns nil when its release is answered (whatever
// the outcome) and after the handle was settled, and the attempt's error otherwise.
func TestPermitCloseReturnsFirstAttempt(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply int
	}{{"released", 1}, {"not owned", -1}} {
		t.Run(tt.name, func(t *testing.T) {
			c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, tt.reply) }}
			s, err := New(c, slot0Key(t), 2, quiet)
			if err != nil {
				t.Fatal(err)
			}
			p := grantNow(t, s, "owner", time.Minute)
			if err := p.Close(); err != nil {
				t.Fatalf("Close = %v, want nil", err)
			}
			if err := p.Close(); err != nil || len(c.sent()) != 1 {
				t.Fatalf("second Close = %v after %d commands, want nil and no I/O", err, len(c.sent()))
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	refused := errors.New("ERR refused")
	s, _, _ := newFailing(t, refused, WithCleanupRetryWindow(20*time.Millisecond))
	p := grantNow(t, s, "owner", time.Minute)
	if err := p.Close(); !errors.Is(err, refused) || errors.Is(err, ErrUncertain) || !strings.HasPrefix(err.Error(), "semaphore: ") {
		t.Fatalf("Close on a refusing server = %v, want its error", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A failed acquisition with an error of unknown kind (not a reply, not a transport error) may have been
// applied (luakit.MayHaveApplied): it still sends a release, and retries it in the background.
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
	_ = s.Close(ctx)
	if got := abandonedPoints(t, reader); got[attrs(stageAcquire, reasonClosed)] != 1 {
		t.Fatalf("abandoned = %v, want one acquire/closed", got)
	}
}

// An error reply stops the script before its first write: a transient one ("not now": LOADING, BUSY,
// READONLY, OOM, ...), the ACL's NOPERM, a WRONGTYPE. Nothing to clean up: the acquisition is the only
// call.
func TestErrorReplyAcquireSendsNoCleanup(t *testing.T) {
	for _, tt := range []struct {
		name, reply string
		is          error
	}{
		{"transient", "LOADING Redis is loading the dataset in memory", nil},
		{"noperm", "NOPERM User app has no permissions to run the 'zadd' command", ErrNoPermission},
		{"wrongtype", "WRONGTYPE Operation against a key holding the wrong kind of value", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, c, reader := newFailing(t, serverErr(t, tt.reply))
			_, err := s.TryAcquire(context.Background(), time.Second)
			if err == nil || errors.Is(err, ErrUncertain) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("TryAcquire = %v, want the reply's error", err)
			}
			if n := c.calls.Load(); n != 1 {
				t.Fatalf("%d calls, want the acquisition only", n)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := abandonedPoints(t, reader); len(got) != 0 {
				t.Fatalf("abandoned = %v, want none", got)
			}
		})
	}
}

func TestUncertainAcquire(t *testing.T) {
	s, c, _ := newFailing(t, io.ErrUnexpectedEOF, WithCleanupRetryWindow(30*time.Millisecond))
	p, err := s.TryAcquireNoExpiry(context.Background())
	if p != nil || !errors.Is(err, ErrUncertain) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("TryAcquire = %v, %v; want ErrUncertain", p, err)
	}
	if c.calls.Load() < 2 {
		t.Fatal("no cleanup release after an uncertain acquisition")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestLateGrant: a grant whose reply came after the local estimate elapsed is ErrLateReply; the
// owner-checked release is sent for it and, unanswered, retried in the background.
func TestLateGrant(t *testing.T) {
	s, c, reader := newFailing(t, io.EOF)
	p, err := grant(s, "owner", time.Now().Add(-time.Second), 10*time.Millisecond)
	if p != nil || !errors.Is(err, ErrLateReply) {
		t.Fatalf("late grant = %v, %v; want nil, ErrLateReply", p, err)
	}
	if c.calls.Load() != 1 {
		t.Fatalf("%d calls, want the cleanup release", c.calls.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = s.Close(ctx)
	if c.calls.Load() < 2 {
		t.Fatal("the unanswered cleanup of a late grant was not retried")
	}
	if got := abandonedPoints(t, reader); got[attrs(stageAcquire, reasonClosed)] != 1 {
		t.Fatalf("abandoned = %v, want one acquire/closed", got)
	}
}

// TestUncertainExtendKeepsPermit: a renewal without a reply may still run, so the handle keeps its
// previous estimate (a safe lower bound) and sends nothing else.
func TestUncertainExtendKeepsPermit(t *testing.T) {
	s, c, reader := newFailing(t, context.DeadlineExceeded)
	p := grantNow(t, s, "owner", time.Minute)
	before := p.Deadline()
	ok, err := p.ExtendTTL(context.Background(), 2*time.Minute)
	if ok || !errors.Is(err, ErrUncertain) {
		t.Fatalf("ExtendTTL = %v, %v; want ErrUncertain", ok, err)
	}
	if p.Err() != nil || p.Remaining() == 0 || !p.Deadline().Equal(before) || p.TTL() != time.Minute {
		t.Fatalf("after an uncertain ExtendTTL: err %v remaining %v deadline moved %v ttl %v",
			p.Err(), p.Remaining(), !p.Deadline().Equal(before), p.TTL())
	}
	if n := c.calls.Load(); n != 1 {
		t.Fatalf("%d calls, want the renewal only", n)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := abandonedPoints(t, reader); len(got) != 0 {
		t.Fatalf("abandoned = %v, want none", got)
	}
}

func TestVerifyFailureKeepsPermit(t *testing.T) {
	s, _, _ := newFailing(t, io.EOF)
	p := grantNow(t, s, "owner", time.Minute)
	ok, err := p.Verify(context.Background())
	if ok || !errors.Is(err, ErrUncertain) {
		t.Fatalf("Verify = %v, %v", ok, err)
	}
	if p.Err() != nil || p.Remaining() == 0 {
		t.Fatal("a failed Verify changed the handle")
	}
}

func TestReleaseUnconfirmed(t *testing.T) {
	s, c, _ := newFailing(t, io.EOF)
	p := grantNow(t, s, "owner", time.Minute)
	_, err := p.Release(context.Background())
	if !errors.Is(err, ErrUncertain) {
		t.Fatalf("Release = %v, want ErrUncertain", err)
	}
	if !errors.Is(p.Err(), ErrReleased) {
		t.Fatal("Release must end the handle")
	}
	if _, err := p.Release(context.Background()); !errors.Is(err, ErrUncertain) {
		t.Fatalf("retried Release = %v", err)
	}
	if n := c.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want one per Release and no background retry", n)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// countingHandler counts warnings.
type countingHandler struct {
	slog.Handler
	warnings atomic.Int64
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.warnings.Add(1)
	}
	return nil
}

// TestAcquireWakesAtEarliestExpiry: without a tracker a full semaphore's waiter sleeps until the
// earliest permit's expiry that the script reported (not a fixed period), tries again, and warns once.
func TestAcquireWakesAtEarliestExpiry(t *testing.T) {
	var n atomic.Int64
	c := &scripted{answer: func([]string) rueidis.RedisResult {
		if n.Add(1) == 1 {
			return result(t, []any{0, 2, 150})
		}
		return result(t, []any{1, 2})
	}}
	h := &countingHandler{}
	s, err := New(c, slot0Key(t), 2, WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := s.Acquire(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 900*time.Millisecond {
		t.Fatalf("acquired after %v, want the earliest permit's 150ms", d)
	}
	if got := c.count(acquireScript); got != 2 {
		t.Fatalf("%d attempts, want 2", got)
	}
	if h.warnings.Load() != 1 {
		t.Fatalf("%d warnings, want one about waiting without invalidations", h.warnings.Load())
	}
	if p.TTL() != time.Minute || p.Err() != nil {
		t.Fatal("the acquired permit is not held")
	}
}

// TestAcquireArmsBeforeRetrying: with a tracker, the first busy attempt is repeated once the semaphore
// key is tracked, so a release between that attempt and the tracked read (which would send no
// invalidation) is not missed. Here the repeated attempt finds the free permit at once, although the
// earliest permit is 10s away.
func TestAcquireArmsBeforeRetrying(t *testing.T) {
	var attempts atomic.Int64
	c := &scripted{answer: func(cmd []string) rueidis.RedisResult {
		if cmd[0] == "CACHED" {
			return rueidis.NewResult(replytest.Cached(t, 10_000, time.Minute), nil) // PTTL, tracked
		}
		if attempts.Add(1) == 1 {
			return result(t, []any{0, 2, 10_000})
		}
		return result(t, []any{1, 2})
	}}
	s, err := New(c, slot0Key(t), 2, WithTracker(luakit.NewTracker()), quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.Acquire(ctx, time.Minute); err != nil {
		t.Fatalf("Acquire = %v: a release between the attempt and the tracked read was missed", err)
	}
	cmds := c.sent()
	if len(cmds) != 3 || cmds[1][0] != "CACHED" {
		t.Fatalf("sent %q, want attempt, tracked read, attempt", cmds)
	}
}

// TestAcquireRetriesAndErrors: transient replies are retried after the retry delay; a capacity
// mismatch ends the wait (no cleanup: nothing was written); ctx ending while asleep ends it.
func TestAcquireRetriesAndErrors(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		var n atomic.Int64
		c := &scripted{answer: func([]string) rueidis.RedisResult {
			if n.Add(1) < 3 {
				return rueidis.NewErrorResult(serverErr(t, "BUSY Redis is busy running a script"))
			}
			return result(t, []any{1, 1})
		}}
		s, err := New(c, slot0Key(t), 2, WithRetryDelay(20*time.Millisecond), quiet)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := s.Acquire(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 40*time.Millisecond {
			t.Fatalf("two retries after %v, want the 20ms retry delay each", d)
		}
		if got := len(c.sent()); got != 3 {
			t.Fatalf("%d commands, want three attempts and no cleanup", got)
		}
	})
	t.Run("mismatch", func(t *testing.T) {
		c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, []any{-5, "3"}) }}
		s, err := New(c, slot0Key(t), 2, quiet)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire(context.Background(), time.Minute)
		var cm *CapacityMismatchError
		if !errors.As(err, &cm) || cm.Stored != 3 || cm.Requested != 2 {
			t.Fatalf("Acquire = %v, want a CapacityMismatchError", err)
		}
		if got := len(c.sent()); got != 1 {
			t.Fatalf("%d commands, want the attempt only", got)
		}
	})
	t.Run("ctx", func(t *testing.T) {
		c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, []any{0, 2, -1}) }}
		s, err := New(c, slot0Key(t), 2, quiet)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = s.Acquire(ctx, time.Minute)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUncertain) {
			t.Fatalf("Acquire = %v, want DeadlineExceeded (no attempt was in flight)", err)
		}
	})
}

// TestPermitWeightChecked: a permit weight outside [1, capacity] fails before any I/O with an error
// matching ErrInvalidConfig, for TryAcquireN and AcquireN; a valid weight reaches the server.
func TestPermitWeightChecked(t *testing.T) {
	c := &scripted{answer: func([]string) rueidis.RedisResult { return result(t, []any{0, 3, 1500}) }}
	s, err := New(c, slot0Key(t), 3, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int64{0, -1, 4} {
		if _, err := s.TryAcquireN(ctx, n, time.Second); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("TryAcquireN(%d) = %v, want ErrInvalidConfig", n, err)
		}
		if _, err := s.AcquireN(ctx, n, time.Second); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("AcquireN(%d) = %v, want ErrInvalidConfig", n, err)
		}
	}
	c.mu.Lock()
	sent := len(c.cmds)
	c.mu.Unlock()
	if sent != 0 {
		t.Fatalf("%d commands sent for invalid weights", sent)
	}
	if _, err := s.TryAcquireN(ctx, 3, time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryAcquireN(3) on a full semaphore = %v, want ErrNotAcquired", err)
	}
}

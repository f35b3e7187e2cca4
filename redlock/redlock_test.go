package redlock

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noIO is a rueidis.Client whose every method except Mode panics: validation tests use it to prove that
// bad input is rejected before any I/O. id makes distinct stubs unequal.
type noIO struct {
	rueidis.Client
	mode rueidis.ClientMode
	id   int
}

func (c noIO) Mode() rueidis.ClientMode { return c.mode }

func stubs(n int) []rueidis.Client {
	out := make([]rueidis.Client, n)
	for i := range out {
		out[i] = noIO{mode: rueidis.ClientModeStandalone, id: i}
	}
	return out
}

func TestNewGroup(t *testing.T) {
	dup := stubs(3)
	dup[2] = dup[0]
	withNil := stubs(3)
	withNil[1] = nil
	withCluster := stubs(5)
	withCluster[3] = noIO{mode: rueidis.ClientModeCluster, id: 3}
	withSentinel := stubs(3)
	withSentinel[0] = noIO{mode: rueidis.ClientModeSentinel, id: 0}
	tests := []struct {
		name    string
		clients []rueidis.Client
		opts    []Option
		want    error // nil: success
		quorum  int
	}{
		{"three", stubs(3), nil, nil, 2},
		{"five", stubs(5), nil, nil, 3},
		{"seven", stubs(7), nil, nil, 4},
		{"none", nil, nil, ErrNodeCount, 0},
		{"one", stubs(1), nil, ErrNodeCount, 0},
		{"two", stubs(2), nil, ErrNodeCount, 0},
		{"four", stubs(4), nil, ErrNodeCount, 0},
		{"nil client", withNil, nil, ErrNilClient, 0},
		{"cluster client", withCluster, nil, ErrClusterClient, 0},
		{"sentinel client", withSentinel, nil, nil, 2},
		{"duplicate client", dup, nil, ErrDuplicateClient, 0},
		{"all options", stubs(3), []Option{
			WithNodeTimeout(50 * time.Millisecond), WithDriftFactor(0), WithRetryDelay(time.Millisecond),
			WithKeyPrefix("\x00app{x}:"), WithFencing("fence"), WithLogger(slog.Default()), nil,
		}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGroup(tt.clients, tt.opts...)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("NewGroup error = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewGroup: %v", err)
			}
			if g.Quorum() != tt.quorum || g.Nodes() != len(tt.clients) {
				t.Fatalf("quorum %d of %d, want %d of %d", g.Quorum(), g.Nodes(), tt.quorum, len(tt.clients))
			}
		})
	}
}

func TestOptionsInvalid(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
	}{
		{"zero node timeout", WithNodeTimeout(0)},
		{"negative node timeout", WithNodeTimeout(-time.Second)},
		{"negative drift", WithDriftFactor(-0.1)},
		{"drift too large", WithDriftFactor(0.5)},
		{"drift NaN", WithDriftFactor(math.NaN())},
		{"zero retry delay", WithRetryDelay(0)},
		{"empty fence key", WithFencing("")},
		{"nil logger", WithLogger(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewGroup(stubs(3), tt.opt); err == nil {
				t.Fatal("NewGroup accepted an invalid option")
			} else if !strings.HasPrefix(err.Error(), "redlock: ") && !strings.HasPrefix(err.Error(), "luakit: ") {
				t.Fatalf("error %q lacks a package prefix", err)
			}
		})
	}
}

func TestValidationBeforeIO(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		opts   []Option
		ctx    context.Context
		key    string
		ttl    time.Duration
		want   error
		wantIs error
	}{
		{"empty key", nil, context.Background(), "", time.Second, luakit.ErrEmptyKey, nil},
		{"zero ttl", nil, context.Background(), "k", 0, ErrInvalidTTL, nil},
		{"negative ttl", nil, context.Background(), "k", -time.Second, ErrInvalidTTL, nil},
		{"sub-ms ttl", nil, context.Background(), "k", 999 * time.Microsecond, ErrInvalidTTL, nil},
		{"ttl within drift", nil, context.Background(), "k", 2 * time.Millisecond, ErrInvalidTTL, nil},
		{"ttl within larger drift", []Option{WithDriftFactor(0.4)}, context.Background(), "k", 3 * time.Millisecond, ErrInvalidTTL, nil},
		{"same key as fence", []Option{WithFencing("f")}, context.Background(), "f", time.Second, ErrSameKey, nil},
		{"same key after prefix", []Option{WithKeyPrefix("p:"), WithFencing("f")}, context.Background(), "f", time.Second, ErrSameKey, nil},
		{"cancelled ctx", nil, cancelled, "k", time.Second, context.Canceled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGroup(stubs(3), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			l, err := g.TryAcquire(tt.ctx, tt.key, tt.ttl)
			if l != nil || !errors.Is(err, tt.want) {
				t.Fatalf("TryAcquire = %v, %v; want %v", l, err, tt.want)
			}
			if _, err := g.Acquire(tt.ctx, tt.key, tt.ttl); !errors.Is(err, tt.want) {
				t.Fatalf("Acquire error = %v; want %v", err, tt.want)
			}
		})
	}
}

func TestQuorumError(t *testing.T) {
	e := &QuorumError{Op: "acquire", Needed: 3, Got: 1, Nodes: []NodeError{
		{Index: 0, Addr: "127.0.0.1:1", Err: ErrHeld},
		{Index: 2, Err: errors.Join(ErrUncertain, context.DeadlineExceeded)},
		{Index: 4, Err: &CounterError{Reason: CounterExpiring}},
	}}
	var err error = e
	for _, want := range []error{ErrNoQuorum, ErrNotAcquired, ErrHeld, ErrUncertain, context.DeadlineExceeded, ErrCounter} {
		if !errors.Is(err, want) {
			t.Errorf("errors.Is(%v) = false", want)
		}
	}
	if errors.Is(err, ErrNotOwner) {
		t.Error("errors.Is(ErrNotOwner) = true")
	}
	var ne NodeError
	if !errors.As(err, &ne) || ne.Index != 0 || ne.Addr != "127.0.0.1:1" {
		t.Errorf("errors.As NodeError = %+v", ne)
	}
	var ce *CounterError
	if !errors.As(err, &ce) || ce.Reason != CounterExpiring {
		t.Errorf("errors.As CounterError = %+v", ce)
	}
	msg := err.Error()
	for _, want := range []string{"redlock: acquire: 1 of 3", "node 0 (127.0.0.1:1)", "node 2:", "expiring"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	rel := &QuorumError{Op: "release", Needed: 2, Got: 0}
	if errors.Is(rel, ErrNotAcquired) || !errors.Is(rel, ErrNoQuorum) {
		t.Error("release QuorumError must wrap ErrNoQuorum only")
	}
	if !errors.Is(&QuorumError{Op: "fence"}, ErrNotAcquired) {
		t.Error("fence QuorumError must wrap ErrNotAcquired")
	}
}

func TestErrorsPrefixed(t *testing.T) {
	for _, err := range []error{
		ErrNotAcquired, ErrNoQuorum, ErrNoValidity, ErrHeld, ErrNotOwner, ErrUncertain, ErrCounter,
		ErrInvalidTTL, ErrSameKey, ErrNodeCount, ErrNilClient, ErrClusterClient, ErrDuplicateClient,
		ErrReleased, ErrExpired, ErrLost, &CounterError{Reason: CounterNegative},
	} {
		if !strings.HasPrefix(err.Error(), "redlock: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
}

func TestInterpretAcquire(t *testing.T) {
	tests := []struct {
		name    string
		code    int64
		second  string
		n       int
		fenced  bool
		got     bool
		counter int64
		err     error
	}{
		{"held", 0, "", 1, false, false, 0, nil},
		{"held fenced", 0, "", 1, true, false, 0, nil},
		{"acquired", 1, "", 1, false, true, 0, nil},
		{"acquired fenced zero", 1, "0", 2, true, true, 0, nil},
		{"acquired fenced above 2^53", 1, "9007199254740995", 2, true, true, 9007199254740995, nil},
		{"acquired fenced max", 1, "9223372036854775807", 2, true, true, math.MaxInt64, nil},
		{"fenced beyond int64", 1, "9223372036854775808", 2, true, false, 0, ErrCounter},
		{"fenced leading zero", 1, "07", 2, true, false, 0, ErrCounter},
		{"fenced negative", 1, "-1", 2, true, false, 0, ErrCounter},
		{"unfenced reply with counter", 1, "0", 2, false, false, 0, errMalformedReply},
		{"fenced reply without counter", 1, "", 1, true, false, 0, errMalformedReply},
		{"wrongtype", -1, "wrongtype", 2, true, false, 0, ErrCounter},
		{"expiring", -1, "expiring", 2, true, false, 0, ErrCounter},
		{"unknown reason", -1, "other", 2, true, false, 0, errMalformedReply},
		{"unknown code", 2, "", 1, false, false, 0, errMalformedReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, counter, err := interpretAcquire(tt.code, tt.second, tt.n, tt.fenced)
			if got != tt.got || counter != tt.counter || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("= %v, %d, %v; want %v, %d, %v", got, counter, err, tt.got, tt.counter, tt.err)
			}
		})
	}
}

func FuzzInterpretAcquire(f *testing.F) {
	f.Add(int64(1), "42", 2, true)
	f.Add(int64(0), "", 1, false)
	f.Add(int64(-1), "malformed", 2, true)
	f.Add(int64(1), "9223372036854775808", 2, true)
	f.Fuzz(func(t *testing.T, code int64, second string, n int, fenced bool) {
		got, counter, err := interpretAcquire(code, second, n, fenced)
		if got && (err != nil || code != 1 || counter < 0) {
			t.Fatalf("acquired with err=%v code=%d counter=%d", err, code, counter)
		}
		if got && fenced && luakit.FormatInt64(counter) != second {
			t.Fatalf("counter %d does not round-trip %q", counter, second)
		}
		if !got && counter != 0 {
			t.Fatalf("counter %d without acquisition", counter)
		}
	})
}

func testLock(t *testing.T, ttl, drift time.Duration) *Lock {
	t.Helper()
	g, err := NewGroup(stubs(3))
	if err != nil {
		t.Fatal(err)
	}
	return newLock(g, "k", "k", "token", 7, ttl, drift, time.Now(), nil)
}

func TestLockLocalLifecycle(t *testing.T) {
	l := testLock(t, 80*time.Millisecond, 2*time.Millisecond)
	if r := l.Remaining(); r <= 0 || r > 78*time.Millisecond {
		t.Fatalf("Remaining = %v", r)
	}
	if l.Err() != nil || l.Key() != "k" || l.FencingToken() != 7 || l.TTL() != 80*time.Millisecond {
		t.Fatalf("fresh lock state: err=%v key=%q fence=%d ttl=%v", l.Err(), l.Key(), l.FencingToken(), l.TTL())
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the validity elapsed")
	}
	if !errors.Is(l.Err(), ErrExpired) || !errors.Is(context.Cause(l.Context()), ErrExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	if l.Remaining() != 0 {
		t.Fatalf("Remaining after expiry = %v", l.Remaining())
	}
	// Renew on an ended handle does no I/O (the stub clients would panic).
	if ok, err := l.Renew(context.Background()); ok || !errors.Is(err, ErrExpired) {
		t.Fatalf("Renew after expiry = %v, %v", ok, err)
	}
}

func TestLockOperationWaitHonoursCtx(t *testing.T) {
	l := testLock(t, time.Minute, 2*time.Millisecond)
	l.op <- struct{}{} // a concurrent operation holds the slot
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ok, err := l.Release(ctx); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if ok, err := l.Renew(ctx); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Renew = %v, %v", ok, err)
	}
	if l.Err() != nil || l.Remaining() <= 0 {
		t.Fatalf("handle changed by a cancelled wait: err=%v remaining=%v", l.Err(), l.Remaining())
	}
	<-l.op
	// Mark it released without I/O: further Release and Close calls do nothing.
	l.mu.Lock()
	l.released = true
	l.endLocked(ErrReleased)
	l.mu.Unlock()
	if ok, err := l.Release(context.Background()); !ok || err != nil {
		t.Fatalf("Release after success = %v, %v", ok, err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after success = %v", err)
	}
	if !errors.Is(l.Err(), ErrReleased) {
		t.Fatalf("Err = %v", l.Err())
	}
}

func TestScriptsLoaded(t *testing.T) {
	for _, s := range []*luakit.Script{acquireScript, fenceScript, extendScript, releaseScript} {
		if !strings.HasPrefix(s.Source(), "-- "+s.Name()+":") {
			t.Errorf("script %s lacks its header comment", s.Name())
		}
	}
}

func TestNodeContext(t *testing.T) {
	g, err := NewGroup(stubs(3), WithNodeTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	parent, cancelParent := context.WithTimeout(context.Background(), time.Hour)
	defer cancelParent()

	nctx, stop := g.nodeContext(parent)
	if _, ok := nctx.Deadline(); ok {
		t.Fatal("node context carries a deadline (rueidis would close the connection when it passes)")
	}
	<-nctx.Done()
	if !errors.Is(context.Cause(nctx), context.DeadlineExceeded) {
		t.Fatalf("cause after the node timeout = %v", context.Cause(nctx))
	}
	stop()

	nctx, stop = g.nodeContext(parent)
	cancelParent()
	<-nctx.Done()
	if !errors.Is(context.Cause(nctx), context.Canceled) {
		t.Fatalf("cause after the parent ended = %v", context.Cause(nctx))
	}
	stop()
}

// TestFanoutOrderAndTimeout: a step's command on node i starts only after the goroutines of earlier
// steps on node i returned (so it is queued behind theirs), and the step returns at the node timeout
// even when a node's call ignores cancellation (a connection handshake), reporting that node as
// timed out; its settled channel closes when that call returns.
func TestFanoutOrderAndTimeout(t *testing.T) {
	g, err := NewGroup(stubs(3), WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Step 1: node 2's call blocks past the node timeout, ignoring its context.
	unblock := make(chan struct{})
	var started [3]atomic.Int32
	res, settled := g.fanout(context.Background(), nil, nil, func(ctx context.Context, i int) rueidis.RedisResult {
		started[i].Add(1)
		if i == 2 {
			<-unblock
		}
		return rueidis.NewErrorResult(errors.New("reply"))
	})
	for i := range 2 {
		if res[i].err == nil || res[i].err.Error() != "reply" {
			t.Fatalf("node %d: %v, want its reply", i, res[i].err)
		}
	}
	if !errors.Is(res[2].err, context.DeadlineExceeded) {
		t.Fatalf("node 2: %v, want the node timeout", res[2].err)
	}
	prior := inflight(nil).with(settled)
	if len(prior[0]) != 0 || len(prior[1]) != 0 || len(prior[2]) != 1 {
		t.Fatalf("in flight after step 1: %d %d %d, want 0 0 1", len(prior[0]), len(prior[1]), len(prior[2]))
	}

	// Step 2 while node 2's first call is still running: nodes 0 and 1 run, node 2 waits and gives up
	// at the node timeout without calling f.
	var calls [3]atomic.Int32
	step := func() []nodeResult {
		r, _ := g.fanout(context.Background(), nil, prior, func(ctx context.Context, i int) rueidis.RedisResult {
			calls[i].Add(1)
			return rueidis.NewErrorResult(errors.New("reply"))
		})
		return r
	}
	res = step()
	if calls[0].Load() != 1 || calls[1].Load() != 1 || calls[2].Load() != 0 {
		t.Fatalf("calls %d %d %d, want 1 1 0: node 2 must wait for step 1's call", calls[0].Load(), calls[1].Load(), calls[2].Load())
	}
	if !errors.Is(res[2].err, context.DeadlineExceeded) {
		t.Fatalf("node 2 in step 2: %v, want the node timeout", res[2].err)
	}

	// Once step 1's call returns, node 2 runs in the next step.
	close(unblock)
	<-settled[2]
	res = step()
	if calls[2].Load() != 1 || res[2].err == nil || res[2].err.Error() != "reply" {
		t.Fatalf("node 2 after step 1 settled: calls %d, %v", calls[2].Load(), res[2].err)
	}
	if got := prior.with(nil); len(got[2]) != 0 {
		t.Fatalf("settled goroutines are dropped from the in-flight set, got %d", len(got[2]))
	}
}

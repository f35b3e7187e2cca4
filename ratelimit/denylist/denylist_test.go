package denylist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit/internal/closetest"
)

// noIOClient satisfies rueidis.Client for constructor tests that must not do I/O: any call panics.
type noIOClient struct{ rueidis.Client }

func TestOptions(t *testing.T) {
	ok := []struct {
		name string
		opts []Option
		dur  time.Duration
		cap  int
		rt   time.Duration
	}{
		{"defaults", nil, time.Second, 1024, 5 * time.Second},
		{"zero duration disables", []Option{WithCacheDuration(0)}, 0, 1024, 5 * time.Second},
		{"nanoseconds kept", []Option{WithCacheDuration(1500 * time.Nanosecond)}, 1500 * time.Nanosecond, 1024, 5 * time.Second},
		{"maximum", []Option{WithCacheDuration(time.Minute)}, time.Minute, 1024, 5 * time.Second},
		{"capacity 1", []Option{WithCacheCapacity(1)}, time.Second, 1, 5 * time.Second},
		{"read timeout", []Option{WithReadTimeout(time.Millisecond)}, time.Second, 1024, time.Millisecond},
		{"last wins", []Option{WithCacheCapacity(5), WithCacheCapacity(7)}, time.Second, 7, 5 * time.Second},
		{"nil option skipped", []Option{nil, WithCacheCapacity(3), nil}, time.Second, 3, 5 * time.Second},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(noIOClient{}, "denied", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			if d.cfg.cacheDuration != tc.dur || d.cfg.cacheCapacity != tc.cap || d.cfg.readTimeout != tc.rt {
				t.Fatalf("config = %v, %d, %v; want %v, %d, %v", d.cfg.cacheDuration, d.cfg.cacheCapacity,
					d.cfg.readTimeout, tc.dur, tc.cap, tc.rt)
			}
		})
	}

	bad := []struct {
		name string
		opt  Option
	}{
		{"negative duration", WithCacheDuration(-time.Nanosecond)},
		{"duration above a minute", WithCacheDuration(time.Minute + time.Nanosecond)},
		{"zero capacity", WithCacheCapacity(0)},
		{"negative capacity", WithCacheCapacity(-1)},
		{"zero read timeout", WithReadTimeout(0)},
		{"negative read timeout", WithReadTimeout(-time.Second)},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(noIOClient{}, "denied", tc.opt)
			if err == nil || d != nil {
				t.Fatalf("New = %v, %v; want an error", d, err)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "ratelimit: ") {
				t.Fatalf("New = %v, want a ratelimit: error matching ErrInvalidConfig", err)
			}
		})
	}

	if _, err := New(nil, "denied"); !errors.Is(err, ErrNilClient) {
		t.Fatalf("nil client: %v, want ErrNilClient", err)
	}
	if _, err := New(noIOClient{}, ""); !errors.Is(err, luakit.ErrEmptyKey) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v, want luakit.ErrEmptyKey matching ErrInvalidConfig", err)
	}
	d, err := New(noIOClient{}, "den\x00ied\xff", WithKeyPrefix("app\xfe:"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if got := d.Key(); got != "den\x00ied\xff" {
		t.Fatalf("Key() = %q, want the key as given, without the prefix", got)
	}
}

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeSet answers membership reads from a map and counts them. When gated, each read blocks until
// released through the channel of its call (in call order), or until its context ends.
type fakeSet struct {
	mu      sync.Mutex
	members map[string]bool
	calls   []string
	gated   bool
	gates   []chan readAnswer
	ctxErrs []error // ctx.Err() seen by each read when it returned
}

type readAnswer struct {
	denied bool
	err    error
}

func (f *fakeSet) read(ctx context.Context, identity string) (bool, error) {
	f.mu.Lock()
	f.calls = append(f.calls, identity)
	var gate chan readAnswer
	if f.gated {
		gate = make(chan readAnswer, 1)
		f.gates = append(f.gates, gate)
	}
	denied := f.members[identity]
	f.mu.Unlock()
	if gate == nil {
		return denied, nil
	}
	select {
	case a := <-gate:
		f.mu.Lock()
		f.ctxErrs = append(f.ctxErrs, ctx.Err())
		f.mu.Unlock()
		return a.denied, a.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (f *fakeSet) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// release answers the i-th gated read.
func (f *fakeSet) release(t *testing.T, i int, a readAnswer) {
	t.Helper()
	waitFor(t, fmt.Sprintf("read %d to start", i), func() bool { return f.numCalls() > i })
	f.mu.Lock()
	g := f.gates[i]
	f.mu.Unlock()
	g <- a
}

// waitFor polls cond (local state only) until it holds; the deadline only guards against a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newTestDenyList(t *testing.T, clock *fakeClock, f *fakeSet, dur time.Duration, capacity int) *List {
	t.Helper()
	cfg := defaultConfig()
	cfg.cacheDuration, cfg.cacheCapacity, cfg.now = dur, capacity, clock.Now
	d := newList(cfg, f.read)
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func mustIsDenied(t *testing.T, d *List, identity string, want bool) {
	t.Helper()
	got, err := d.IsDenied(context.Background(), identity)
	if err != nil {
		t.Fatalf("IsDenied(%q): %v", identity, err)
	}
	if got != want {
		t.Fatalf("IsDenied(%q) = %v, want %v", identity, got, want)
	}
}

func wantStats(t *testing.T, d *List, hits, misses, shared, reads int64) {
	t.Helper()
	s := d.Stats()
	if s.Hits != hits || s.Misses != misses || s.SharedReads != shared || s.ServerReads != reads {
		t.Fatalf("Stats = %+v; want hits %d, misses %d, shared %d, reads %d", s, hits, misses, shared, reads)
	}
}

func TestEmptyIdentity(t *testing.T) {
	f := &fakeSet{members: map[string]bool{"a": true}}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 4)
	mustIsDenied(t, d, "a", true)
	if _, err := d.IsDenied(context.Background(), ""); !errors.Is(err, ErrEmptyIdentity) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("IsDenied(\"\"): %v", err)
	}
	if err := d.SetDenied(context.Background(), "", true); !errors.Is(err, ErrEmptyIdentity) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetDenied(\"\"): %v", err)
	}
	// The rejected write left the cache intact.
	mustIsDenied(t, d, "a", true)
	wantStats(t, d, 1, 1, 0, 1)
}

func TestCacheExpiry(t *testing.T) {
	clock := newFakeClock()
	f := &fakeSet{members: map[string]bool{"denied": true}}
	d := newTestDenyList(t, clock, f, 10*time.Second, 4)

	mustIsDenied(t, d, "denied", true)
	mustIsDenied(t, d, "allowed", false)
	wantStats(t, d, 0, 2, 0, 2)
	// Both answers are cached; hits do not extend the expiry.
	clock.Advance(9*time.Second + 999*time.Millisecond)
	mustIsDenied(t, d, "denied", true)
	mustIsDenied(t, d, "allowed", false)
	wantStats(t, d, 2, 2, 0, 2)
	clock.Advance(time.Millisecond) // exactly the duration after the reads started
	f.members["allowed"] = true
	mustIsDenied(t, d, "denied", true)
	mustIsDenied(t, d, "allowed", true)
	wantStats(t, d, 2, 4, 0, 4)
}

func TestExpiryCountsFromReadStart(t *testing.T) {
	clock := newFakeClock()
	f := &fakeSet{members: map[string]bool{}, gated: true}
	d := newTestDenyList(t, clock, f, 10*time.Second, 4)

	// A read that takes 4 s is cached for the remaining 6 s.
	done := make(chan struct{})
	go func() { defer close(done); mustIsDenied(t, d, "slow", true) }()
	waitFor(t, "the read to start", func() bool { return f.numCalls() == 1 })
	clock.Advance(4 * time.Second)
	f.release(t, 0, readAnswer{denied: true})
	<-done
	clock.Advance(6*time.Second - time.Nanosecond)
	mustIsDenied(t, d, "slow", true)
	wantStats(t, d, 1, 1, 0, 1)
	clock.Advance(time.Nanosecond)
	go func() { f.release(t, 1, readAnswer{denied: false}) }()
	mustIsDenied(t, d, "slow", false)
	wantStats(t, d, 1, 2, 0, 2)

	// A read slower than the duration answers its callers but is not cached.
	done = make(chan struct{})
	go func() { defer close(done); mustIsDenied(t, d, "slower", true) }()
	waitFor(t, "the third read to start", func() bool { return f.numCalls() == 3 })
	clock.Advance(10 * time.Second)
	f.release(t, 2, readAnswer{denied: true})
	<-done
	clock.Advance(-time.Second) // even earlier than its expiry, nothing was cached for it
	go func() { f.release(t, 3, readAnswer{denied: false}) }()
	mustIsDenied(t, d, "slower", false)
	wantStats(t, d, 1, 4, 0, 4)
}

func TestLRUEviction(t *testing.T) {
	clock := newFakeClock()
	f := &fakeSet{members: map[string]bool{"a": true, "c": true}}
	d := newTestDenyList(t, clock, f, 10*time.Second, 3)

	mustIsDenied(t, d, "a", true)
	mustIsDenied(t, d, "b", false)
	mustIsDenied(t, d, "c", true)
	mustIsDenied(t, d, "a", true) // a is now the most recently used; b the least
	wantStats(t, d, 1, 3, 0, 3)
	mustIsDenied(t, d, "d", false) // full: evicts b
	if got := d.Stats().Cached; got != 3 {
		t.Fatalf("Cached = %d, want 3", got)
	}
	mustIsDenied(t, d, "a", true)
	mustIsDenied(t, d, "c", true)
	mustIsDenied(t, d, "d", false)
	wantStats(t, d, 4, 4, 0, 4)
	mustIsDenied(t, d, "b", false) // evicted: read again (and evicts a, now least recent)
	wantStats(t, d, 4, 5, 0, 5)
	mustIsDenied(t, d, "c", true)
	mustIsDenied(t, d, "d", false)
	mustIsDenied(t, d, "b", false)
	wantStats(t, d, 7, 5, 0, 5)
	mustIsDenied(t, d, "a", true)
	wantStats(t, d, 7, 6, 0, 6)
}

func TestEvictsExpiredBeforeLRU(t *testing.T) {
	clock := newFakeClock()
	f := &fakeSet{members: map[string]bool{}}
	d := newTestDenyList(t, clock, f, 10*time.Second, 3)

	mustIsDenied(t, d, "old", false) // expires at +10 s
	clock.Advance(5 * time.Second)
	mustIsDenied(t, d, "x", false) // expires at +15 s
	mustIsDenied(t, d, "y", false) // expires at +15 s
	clock.Advance(5 * time.Second)
	// old has expired (not yet removed); x is the least recently used live entry.
	mustIsDenied(t, d, "z", false)
	mustIsDenied(t, d, "x", false)
	mustIsDenied(t, d, "y", false)
	mustIsDenied(t, d, "z", false)
	wantStats(t, d, 3, 4, 0, 4)

	// With every entry live, the least recently used one goes: x.
	clock.Advance(time.Second)
	mustIsDenied(t, d, "w", false)
	mustIsDenied(t, d, "y", false)
	mustIsDenied(t, d, "z", false)
	mustIsDenied(t, d, "w", false)
	wantStats(t, d, 6, 5, 0, 5)
	mustIsDenied(t, d, "x", false)
	wantStats(t, d, 6, 6, 0, 6)
}

func TestSharedRead(t *testing.T) {
	clock := newFakeClock()
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, clock, f, time.Second, 8)

	const n = 32
	results := make(chan error, n)
	for range n {
		go func() {
			denied, err := d.IsDenied(context.Background(), "id")
			if err == nil && !denied {
				err = errors.New("not denied")
			}
			results <- err
		}()
	}
	waitFor(t, "every caller to join", func() bool { return d.Stats().Misses == n })
	f.release(t, 0, readAnswer{denied: true})
	for range n {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.numCalls(); got != 1 {
		t.Fatalf("%d reads, want 1", got)
	}
	wantStats(t, d, 0, n, n-1, 1)
	mustIsDenied(t, d, "id", true)
	wantStats(t, d, 1, n, n-1, 1)
}

func TestSharingEndsAtCacheDuration(t *testing.T) {
	clock := newFakeClock()
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, clock, f, time.Second, 8)

	first := make(chan bool, 2)
	ask := func(out chan<- bool) {
		denied, err := d.IsDenied(context.Background(), "id")
		if err != nil {
			t.Error(err)
		}
		out <- denied
	}
	go ask(first)
	waitFor(t, "the first read", func() bool { return f.numCalls() == 1 })
	clock.Advance(time.Second - time.Nanosecond)
	go ask(first) // joins: the read is younger than the duration
	waitFor(t, "the second caller to join", func() bool { return d.Stats().SharedReads == 1 })
	clock.Advance(time.Nanosecond)
	second := make(chan bool, 2)
	go ask(second) // the first read is too old: a fresh read
	waitFor(t, "the second read", func() bool { return f.numCalls() == 2 })
	go ask(second) // joins the fresh read
	waitFor(t, "the fourth caller to join", func() bool { return d.Stats().SharedReads == 2 })

	f.release(t, 1, readAnswer{denied: false})
	f.release(t, 0, readAnswer{denied: true})
	// Existing waiters keep their original read's result.
	if a, b := <-first, <-first; !a || !b {
		t.Fatalf("waiters of the first read got %v, %v; want true, true", a, b)
	}
	if a, b := <-second, <-second; a || b {
		t.Fatalf("waiters of the second read got %v, %v; want false, false", a, b)
	}
	// The fresh read filled the cache; the old one (expired) did not overwrite it.
	mustIsDenied(t, d, "id", false)
	wantStats(t, d, 1, 4, 2, 2)
}

func TestCancelledCallerDoesNotCancelRead(t *testing.T) {
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 8)

	cctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := d.IsDenied(cctx, "id")
		cancelled <- err
	}()
	waitFor(t, "the read", func() bool { return f.numCalls() == 1 })
	other := make(chan bool, 1)
	go func() {
		denied, err := d.IsDenied(context.Background(), "id")
		if err != nil {
			t.Error(err)
		}
		other <- denied
	}()
	waitFor(t, "the second caller to join", func() bool { return d.Stats().SharedReads == 1 })
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	f.release(t, 0, readAnswer{denied: true})
	if !<-other {
		t.Fatal("other caller: not denied")
	}
	f.mu.Lock()
	readErr := f.ctxErrs[0]
	f.mu.Unlock()
	if readErr != nil {
		t.Fatalf("the shared read's context ended: %v", readErr)
	}
	mustIsDenied(t, d, "id", true)
	wantStats(t, d, 1, 2, 1, 1)
}

func TestInvalidateDetachesReads(t *testing.T) {
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 8)

	old := make(chan bool, 1)
	go func() {
		denied, err := d.IsDenied(context.Background(), "id")
		if err != nil {
			t.Error(err)
		}
		old <- denied
	}()
	waitFor(t, "the first read", func() bool { return f.numCalls() == 1 })
	d.Invalidate()
	fresh := make(chan bool, 1)
	go func() {
		denied, err := d.IsDenied(context.Background(), "id")
		if err != nil {
			t.Error(err)
		}
		fresh <- denied
	}()
	// The caller after Invalidate does not join the older read.
	waitFor(t, "a second read", func() bool { return f.numCalls() == 2 })
	wantStats(t, d, 0, 2, 0, 2)

	f.release(t, 1, readAnswer{denied: false})
	if <-fresh {
		t.Fatal("fresh read: denied")
	}
	f.release(t, 0, readAnswer{denied: true}) // completes last: must not refill the cache
	if !<-old {
		t.Fatal("old read: not denied")
	}
	mustIsDenied(t, d, "id", false)
	wantStats(t, d, 1, 2, 0, 2)

	// A detached read that completes with nothing newer cached does not fill the cache either.
	go func() {
		if _, err := d.IsDenied(context.Background(), "other"); err != nil {
			t.Error(err)
		}
		old <- true
	}()
	waitFor(t, "a third read", func() bool { return f.numCalls() == 3 })
	d.Invalidate()
	f.release(t, 2, readAnswer{denied: true})
	<-old
	if got := d.Stats().Cached; got != 0 {
		t.Fatalf("Cached = %d after a detached read, want 0", got)
	}
}

func TestInFlightBound(t *testing.T) {
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 2)

	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.IsDenied(context.Background(), id); err != nil {
				t.Error(err)
			}
		}()
	}
	waitFor(t, "two shared reads", func() bool { return f.numCalls() == 2 })

	// A third identity reads directly with the caller's context: cancelling it ends the read.
	cctx, cancel := context.WithCancel(context.Background())
	excess := make(chan error, 1)
	go func() {
		_, err := d.IsDenied(cctx, "c")
		excess <- err
	}()
	waitFor(t, "the direct read", func() bool { return f.numCalls() == 3 })
	cancel()
	if err := <-excess; !errors.Is(err, context.Canceled) {
		t.Fatalf("excess caller: %v, want context.Canceled", err)
	}
	// A direct read that completes caches nothing.
	go func() { f.release(t, 3, readAnswer{denied: true}) }()
	mustIsDenied(t, d, "c", true)
	f.release(t, 0, readAnswer{})
	f.release(t, 1, readAnswer{})
	wg.Wait()
	if got := d.Stats().Cached; got != 2 {
		t.Fatalf("Cached = %d, want 2 (a and b only)", got)
	}
	wantStats(t, d, 0, 4, 0, 4)
}

func TestZeroDurationDisablesCacheAndSharing(t *testing.T) {
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, newFakeClock(), f, 0, 8)

	const n = 4
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.IsDenied(context.Background(), "id"); err != nil {
				t.Error(err)
			}
		}()
	}
	waitFor(t, "one read per caller", func() bool { return f.numCalls() == n })
	for i := range n {
		f.release(t, i, readAnswer{denied: true})
	}
	wg.Wait()
	go func() { f.release(t, n, readAnswer{denied: false}) }()
	mustIsDenied(t, d, "id", false)
	wantStats(t, d, 0, n+1, 0, n+1)
	if got := d.Stats().Cached; got != 0 {
		t.Fatalf("Cached = %d, want 0", got)
	}
}

func TestReadErrorsNotCached(t *testing.T) {
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 8)
	boom := errors.New("boom")
	go func() { f.release(t, 0, readAnswer{err: boom}) }()
	if _, err := d.IsDenied(context.Background(), "id"); !errors.Is(err, boom) {
		t.Fatalf("IsDenied: %v, want boom", err)
	}
	go func() { f.release(t, 1, readAnswer{denied: true}) }()
	mustIsDenied(t, d, "id", true)
	wantStats(t, d, 0, 2, 0, 2)
}

func TestReadTimeout(t *testing.T) {
	f := &fakeSet{gated: true}
	cfg := defaultConfig()
	cfg.readTimeout = 20 * time.Millisecond
	d := newList(cfg, f.read)
	defer d.Close(context.Background())
	// The caller has no deadline; the shared read gives up at the read timeout.
	if _, err := d.IsDenied(context.Background(), "id"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("IsDenied: %v, want context.DeadlineExceeded", err)
	}
}

func TestClose(t *testing.T) {
	f := &fakeSet{gated: true}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 8)
	waiting := make(chan error, 1)
	go func() {
		_, err := d.IsDenied(context.Background(), "id")
		waiting <- err
	}()
	waitFor(t, "the read", func() bool { return f.numCalls() == 1 })
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Close returned: the shared read's goroutine has ended, and its waiter got ErrClosed.
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter: %v, want ErrClosed", err)
	}
	if _, err := d.IsDenied(context.Background(), "id"); !errors.Is(err, ErrClosed) {
		t.Fatalf("IsDenied after Close: %v", err)
	}
	if err := d.SetDenied(context.Background(), "id", true); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetDenied after Close: %v", err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// DenyList.Close waits for its shared reads (a stand-in here) until its ctx ends.
func TestCloseWaitsUntilCtxEnds(t *testing.T) {
	d := newList(defaultConfig(), func(context.Context, string) (bool, error) { return false, nil })
	release := make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		<-release
	}()
	closetest.Waits(t, d.Close, release, func() error { _, err := d.IsDenied(context.Background(), "id"); return err })
}

func TestCacheIntactOnCancelledWrite(t *testing.T) {
	f := &fakeSet{members: map[string]bool{"id": true}}
	d := newTestDenyList(t, newFakeClock(), f, time.Second, 8)
	mustIsDenied(t, d, "id", true)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Rejected before any I/O: the cache stays.
	if err := d.SetDenied(cctx, "id", false); !errors.Is(err, context.Canceled) {
		t.Fatalf("SetDenied: %v", err)
	}
	mustIsDenied(t, d, "id", true)
	wantStats(t, d, 1, 1, 0, 1)
}

// BenchmarkDenyListHit measures cache hits (no I/O) from parallel goroutines.
func BenchmarkDenyListHit(b *testing.B) {
	f := &fakeSet{members: map[string]bool{"id": true}}
	cfg := defaultConfig()
	cfg.cacheDuration = time.Minute
	d := newList(cfg, f.read)
	defer d.Close(context.Background())
	if _, err := d.IsDenied(context.Background(), "id"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if denied, err := d.IsDenied(context.Background(), "id"); err != nil || !denied {
				b.Fatal(denied, err)
			}
		}
	})
}

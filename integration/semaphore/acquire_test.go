package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/semaphore"
)

// The waiting acquisition, Semaphore.Acquire: what wakes it (a release, through an invalidation of
// the semaphore key; the earliest permit's expiry, from the script's reply), what ends it (ctx), that
// it sends nothing while asleep, and the capacity invariant with many waiters.

// acquired is the result of an asynchronous Acquire.
type acquired struct {
	p   *semaphore.Permit
	err error
	at  time.Time
}

// acquireAsync runs s.Acquire(ctx, ttl) in a goroutine; the channel receives its result.
func acquireAsync(ctx context.Context, s *semaphore.Semaphore, ttl time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		p, err := s.Acquire(ctx, ttl)
		ch <- acquired{p: p, err: err, at: time.Now()}
	}()
	return ch
}

// await returns the result of ch, failing t after d.
func await(t *testing.T, ch <-chan acquired, d time.Duration) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("Acquire did not return within %v", d)
		return acquired{}
	}
}

// requireWaiting asserts that ch has no result yet.
func requireWaiting(t *testing.T, ch <-chan acquired) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Acquire returned while the semaphore was full: %v, %v", r.p, r.err)
	default:
	}
}

// waitArmed waits until some client made a tracked read (PTTL) of the key since before (the waiter's
// arming: it is about to sleep) and the servers then ran nothing for 100 ms (the attempt that follows
// the arming read is done, however late), and returns the reading at that point.
func (e *env) waitArmed(t *testing.T, before map[string]int64) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.CommandStats(t)["pttl"] <= before["pttl"] {
		require.True(t, time.Now().Before(deadline), "the waiter never armed tracking")
		time.Sleep(10 * time.Millisecond)
	}
	return e.WaitQuiet(t, 100*time.Millisecond, 5*time.Second)
}

// noExpiry, given to fill, takes a permit without expiry (TryAcquireNoExpiry); a TTL of 0 is
// ErrInvalidTTL in the API itself.
const noExpiry time.Duration = 0

// fill takes capacity permits with the given TTLs on a client of its own.
func fill(t *testing.T, e *env, key string, capacity int64, ttls ...time.Duration) []*semaphore.Permit {
	t.Helper()
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, capacity)
	var out []*semaphore.Permit
	for _, ttl := range ttls {
		acquire := func() (*semaphore.Permit, error) { return s.TryAcquire(ctx(t), ttl) }
		if ttl == noExpiry {
			acquire = func() (*semaphore.Permit, error) { return s.TryAcquireNoExpiry(ctx(t)) }
		}
		p, err := acquire()
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// 12. A full semaphore (capacity 2, holders' TTL 30s): a waiter on a tracked client sleeps until one
// holder releases, then takes the freed permit well within its 5s ctx.
func testAcquireWokenByRelease(t *testing.T, e *env) {
	const key = "ck:sem:wake-release"
	held := fill(t, e, key, 2, 30*time.Second, 30*time.Second)
	waiter := newSem(t, e.trackedClient(t), key, 2)

	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := e.CommandStats(t)
	ch := acquireAsync(wctx, waiter, 30*time.Second)
	e.waitArmed(t, before)
	requireWaiting(t, ch)

	start := time.Now()
	release(t, held[0], semaphore.Released)
	r := await(t, ch, 6*time.Second)
	require.NoError(t, r.err, "the release must wake the waiter")
	t.Logf("acquired %v after the release", r.at.Sub(start))
	require.Less(t, r.at.Sub(start), 2*time.Second)
	e.requirePermit(t, key, r.p, false)
	require.EqualValues(t, 2, e.permits(t, key))

	release(t, r.p, semaphore.Released)
	release(t, held[1], semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

// 13. A full semaphore whose earliest permit expires (600ms) while the other lives 30s (so the key's
// own PTTL, 30s, is no help): the waiter wakes at the earliest permit's expiry that the script
// reported, on a tracked client (no invalidation comes: an expiring member writes nothing) and on a
// client without tracking alike.
func testAcquireWokenByExpiry(t *testing.T, e *env) {
	const key = "ck:sem:wake-expiry"
	const short = 600 * time.Millisecond
	for _, tracked := range []bool{true, false} {
		t.Run(fmt.Sprintf("tracked=%v", tracked), func(t *testing.T) {
			c := e.NewClient(t, nil, matrix.NoCache)
			if tracked {
				c = e.trackedClient(t)
			}
			waiter := newSem(t, c, key, 2, semaphore.WithLogger(slog.New(slog.DiscardHandler)))
			start := time.Now()
			held := fill(t, e, key, 2, short, 30*time.Second)
			wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r := await(t, acquireAsync(wctx, waiter, 30*time.Second), 6*time.Second)
			require.NoError(t, r.err, "the earliest permit's expiry must wake the waiter")
			took := r.at.Sub(start)
			t.Logf("acquired %v after filling (earliest permit %v)", took, short)
			require.GreaterOrEqual(t, took, short-50*time.Millisecond, "acquired before a permit freed up")
			// Well before the untracked re-check (1s) and the key's PTTL (30s).
			require.Less(t, took, short+300*time.Millisecond)
			require.NotContains(t, e.members(t, key), held[0].OwnerToken(), "the expired permit was pruned")

			release(t, r.p, semaphore.Released)
			release(t, held[1], semaphore.Released)
			e.requireAbsent(t, key, "key at the end")
		})
	}
}

// 14. Ending ctx ends the wait with ctx's error (not uncertain: no attempt was in flight), for a
// deadline and a cancellation; the waiter leaves nothing on the server.
func testAcquireCtxEndsWait(t *testing.T, e *env) {
	const key = "ck:sem:wake-ctx"
	held := fill(t, e, key, 2, noExpiry, 30*time.Second)
	waiter := newSem(t, e.trackedClient(t), key, 2)
	before := e.members(t, key)

	start := time.Now()
	dctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r := await(t, acquireAsync(dctx, waiter, time.Minute), 3*time.Second)
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	require.NotErrorIs(t, r.err, semaphore.ErrUncertain)
	require.Nil(t, r.p)
	require.Less(t, time.Since(start), 1500*time.Millisecond, "the wait outlived its ctx")

	cctx, cancel2 := context.WithCancel(context.Background())
	ch := acquireAsync(cctx, waiter, time.Minute)
	time.Sleep(200 * time.Millisecond)
	requireWaiting(t, ch)
	cancel2()
	r = await(t, ch, 2*time.Second)
	require.ErrorIs(t, r.err, context.Canceled)
	require.Equal(t, before, e.members(t, key), "a waiter that gave up wrote nothing")

	release(t, held[0], semaphore.Released)
	release(t, held[1], semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

// 15. No polling: once the waiter armed tracking on a semaphore held for 10s it sends nothing for a
// whole second (server commandstats, every node: nothing but the target's background commands, see
// matrix.Env.CommandsSince); the release then wakes it at once.
func testAcquireDoesNotPoll(t *testing.T, e *env) {
	const (
		key      = "ck:sem:no-poll"
		idle     = time.Second
		maxIdle  = 2 // commands any client may send in the idle second (background commands excluded)
		holderTT = 10 * time.Second
	)
	held := fill(t, e, key, 1, holderTT)
	waiter := newSem(t, e.trackedClient(t), key, 1)
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := e.CommandStats(t)
	ch := acquireAsync(wctx, waiter, time.Minute)
	st0 := e.waitArmed(t, before)
	time.Sleep(idle)
	d := e.CommandsSince(t, st0)
	requireWaiting(t, ch)
	t.Logf("commands during %v of waiting: %v (before it: %v)", idle, d, e.CommandsBetween(before, st0))
	require.LessOrEqual(t, matrix.Total(d), int64(maxIdle), "the waiter polled: %v", d)

	start := time.Now()
	release(t, held[0], semaphore.Released)
	r := await(t, ch, 5*time.Second)
	require.NoError(t, r.err)
	require.Less(t, r.at.Sub(start), 2*time.Second)
	release(t, r.p, semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

// 16. Many waiters on few permits: 10 goroutines on two tracked clients take 5 permits each from a
// semaphore of capacity 3 with Acquire (long TTL, released after a short hold). At most 3 hold at any
// instant (an atomic counter checked by each new holder, and ZCARD sampled throughout), every
// acquisition succeeds, and the key ends absent.
func testAcquireConcurrent(t *testing.T, e *env) {
	const (
		capacity = 3
		workers  = 10
		rounds   = 5
		key      = "ck:sem:acquire-concurrent"
	)
	sems := []*semaphore.Semaphore{
		newSem(t, e.trackedClient(t), key, capacity),
		newSem(t, e.trackedClient(t), key, capacity),
	}
	stop := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() { // sample ZCARD while the workers run
		var worst int64
		for {
			select {
			case <-stop:
				sampled <- worst
				return
			default:
			}
			n, err := e.Raw.Do(context.Background(), e.Raw.B().Zcard().Key(key).Build()).AsInt64()
			if err == nil && n > worst {
				worst = n
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var (
		holders, maxHolders, done atomic.Int64
		wg                        sync.WaitGroup
	)
	errs := make(chan error, workers*rounds)
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for w := range workers {
		wg.Go(func() {
			s := sems[w%len(sems)]
			for range rounds {
				p, err := s.Acquire(wctx, 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				n := holders.Add(1)
				for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
				}
				if n > capacity {
					errs <- fmt.Errorf("%d holders, capacity %d", n, capacity)
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				done.Add(1)
				if out, err := p.Release(context.Background()); err != nil || out != semaphore.Released {
					errs <- errors.Join(fmt.Errorf("release %v", out), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	worst := <-sampled
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d acquisitions, max %d holders, max ZCARD %d", done.Load(), maxHolders.Load(), worst)
	require.EqualValues(t, workers*rounds, done.Load(), "every waiter must have been served")
	require.LessOrEqual(t, maxHolders.Load(), int64(capacity))
	require.LessOrEqual(t, worst, int64(capacity+1), "ZCARD (permits + capacity member) above capacity")
	e.requireAbsent(t, key, "semaphore key after every release")
}

package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// fairScenarios check the fair lock (lock.FairLocker) on every target.
var fairScenarios = []matrix.Scenario[*env]{
	{Name: "01_uncontended_cycle_leaves_no_queue_keys", Run: testFairCycle},
	{Name: "02_grants_follow_arrival_order_with_increasing_tokens", Run: testFairOrder},
	{Name: "03_no_barging_while_waiters_queue", Run: testFairNoBarging},
	{Name: "04_cancelled_waiter_leaves_the_queue", Run: testFairCancel},
	{Name: "05_release_skips_dead_waiters", Run: testFairSkipsDead},
	{Name: "06_plain_lock_on_the_same_name_is_excluded", Run: testFairWithPlain},
	{Name: "07_granted_lease_keeps_the_contract", Run: testFairGrantedContract},
	{Name: "08_grant_to_a_dead_waiter_is_taken_back", Run: testFairDeadGrantee},
	{Name: "09_inspect_lists_the_queue_without_owner_tokens", Run: testFairInspect},
	{Name: "10_cancel_ends_a_blocked_pop_at_once", Run: testFairCancelBlocked},
}

func TestFairLock(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		matrix.RunScenarios(t, st, startEnv(t, st), fairScenarios, nil)
	})
}

func (e *env) fair(t *testing.T, opts ...lock.Option) *lock.FairLocker {
	t.Helper()
	f, err := lock.NewFair(e.NewClient(t, nil), opts...)
	require.NoError(t, err)
	return f
}

// queueLen returns the length of the fair lock's queue list.
func (e *env) queueLen(t *testing.T, name string) int64 {
	t.Helper()
	n, err := e.Raw.Do(ctx(t), e.Raw.B().Llen().Key("{"+name+"}:queue").Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// waitQueue polls until the queue holds n entries.
func (e *env) waitQueue(t *testing.T, name string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return e.queueLen(t, name) == n }, 10*time.Second, time.Millisecond, "queue of %s never reached %d", name, n)
}

// keysOf lists the keys of the fair lock named name (KEYS on every node of a Cluster).
func (e *env) keysOf(t *testing.T, name string) []string {
	t.Helper()
	var all []string
	for _, n := range e.Raw.Nodes() {
		keys, err := n.Do(ctx(t), n.B().Keys().Pattern("{"+name+"}:*").Build()).AsStrSlice()
		require.NoError(t, err)
		all = append(all, keys...)
	}
	return all
}

func testFairCycle(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, fenceKey := named("fair1")
	f := e.fair(t)
	var last int64
	for i := 0; i < 3; i++ {
		l, err := f.TryAcquire(c, name, 10*time.Second)
		require.NoError(t, err)
		require.Greater(t, l.FencingToken(), last)
		last = l.FencingToken()
		e.requireLease(t, leaseKey, l.OwnerToken())
		release(t, l, lock.Released)
		e.requireAbsent(t, leaseKey, "lease after release")
	}
	require.ElementsMatch(t, []string{fenceKey}, e.keysOf(t, name), "only the fence counter stays")
}

func testFairOrder(t *testing.T, e *env) {
	c := ctx(t)
	name, _, _ := named("fair2")
	// A long slice: a waiter whose renewal a loaded machine delays must not lapse and be skipped,
	// which this test would report as an order violation.
	f := e.fair(t, lock.WithWaitSlice(time.Minute))
	holder, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	const waiters = 64
	type grant struct {
		index int
		token int64
	}
	var (
		mu     sync.Mutex
		grants []grant
		wg     sync.WaitGroup
	)
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := f.Acquire(c, name, 10*time.Second)
			if !assertNoError(t, err) {
				return
			}
			mu.Lock()
			grants = append(grants, grant{i, l.FencingToken()})
			mu.Unlock()
			_, err = l.Release(c)
			assertNoError(t, err)
		}()
		e.waitQueue(t, name, int64(i+1)) // arrival order is i's order
	}
	release(t, holder, lock.Released)
	wg.Wait()
	require.Len(t, grants, waiters)
	last := holder.FencingToken()
	for i, g := range grants {
		require.Equal(t, i, g.index, "grant %d went to waiter %d", i, g.index)
		require.Greater(t, g.token, last, "tokens strictly increase")
		last = g.token
	}
	require.Zero(t, e.queueLen(t, name))
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func testFairNoBarging(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, _ := named("fair3")
	f := e.fair(t, lock.WithWaitSlice(time.Minute)) // the waiter renews only every 30s: only an attempt moves the queue
	holder, err := f.TryAcquire(c, name, 300*time.Millisecond)
	require.NoError(t, err)
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := f.Acquire(c, name, 10*time.Second)
		assertNoError(t, err)
		got <- l
	}()
	e.waitQueue(t, name, 1)
	_, err = f.TryAcquire(c, name, time.Second)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "held, and a waiter queues")
	// The holder's lease expires without a release: the lease is free, the waiter still queued.
	require.Eventually(t, func() bool { _, ok := e.get(t, leaseKey); return ok == false }, 5*time.Second, time.Millisecond)
	require.Equal(t, int64(1), e.queueLen(t, name))
	_, err = f.TryAcquire(c, name, time.Second)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "free, but a waiter queues: no barging")
	// That attempt granted the lease to the waiter.
	var l *lock.Lease
	select {
	case l = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued waiter was not granted the free lease")
	}
	require.NotNil(t, l)
	require.Greater(t, l.FencingToken(), holder.FencingToken())
	e.requireLease(t, leaseKey, l.OwnerToken())
	release(t, l, lock.Released)
}

func testFairCancel(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, fenceKey := named("fair4")
	f := e.fair(t)
	holder, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(c)
	done := make(chan error, 1)
	go func() {
		_, err := f.Acquire(wctx, name, 10*time.Second)
		done <- err
	}()
	e.waitQueue(t, name, 1)
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, e.queueLen(t, name))
	require.ElementsMatch(t, []string{leaseKey, fenceKey}, e.keysOf(t, name), "entry and waiter keys removed")
	release(t, holder, lock.Released)
	e.requireAbsent(t, leaseKey, "lease after release with nobody waiting")
}

func testFairSkipsDead(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, _ := named("fair5")
	f := e.fair(t)
	holder, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	// Two dead waiters ahead: entries whose waiter keys are gone (their slices ended).
	e.do(t, "RPUSH", "{"+name+"}:queue", "0123456789abcdef0123456789abcdef:10000:1000", "fedcba9876543210fedcba9876543210:10000:1000")
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := f.Acquire(c, name, 10*time.Second)
		assertNoError(t, err)
		got <- l
	}()
	e.waitQueue(t, name, 3)
	release(t, holder, lock.Released)
	l := <-got
	require.NotNil(t, l)
	require.Equal(t, holder.FencingToken()+1, l.FencingToken(), "one token issued, for the live waiter")
	e.requireLease(t, leaseKey, l.OwnerToken())
	require.Zero(t, e.queueLen(t, name))
	release(t, l, lock.Released)
}

func testFairWithPlain(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, _ := named("fair6")
	f := e.fair(t, lock.WithWaitSlice(100*time.Millisecond))
	plain := e.locker(t)
	fl, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	_, err = plain.TryAcquire(c, name, time.Second)
	require.ErrorIs(t, err, lock.ErrNotAcquired, "a fair holder excludes a plain attempt")
	release(t, fl, lock.Released)

	pl, err := plain.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := f.Acquire(c, name, 10*time.Second)
		assertNoError(t, err)
		got <- l
	}()
	e.waitQueue(t, name, 1)
	_, err = f.TryAcquire(c, name, time.Second)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	release(t, pl, lock.Released) // deletes the lease without a grant: the waiter takes it at its next renewal
	l := <-got
	require.Greater(t, l.FencingToken(), pl.FencingToken())
	e.requireLease(t, leaseKey, l.OwnerToken())
	release(t, l, lock.Released)
}

func testFairGrantedContract(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, _ := named("fair7")
	f := e.fair(t)
	holder, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := f.Acquire(c, name, 2*time.Second)
		assertNoError(t, err)
		got <- l
	}()
	e.waitQueue(t, name, 1)
	release(t, holder, lock.Released)
	l := <-got
	require.NotNil(t, l)
	require.LessOrEqual(t, l.Remaining(), 2*time.Second)
	require.Positive(t, l.Remaining())
	ok, err := l.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = l.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, name, l.Name())
	require.NoError(t, l.KeepAlive(c))
	require.ErrorIs(t, l.KeepAlive(c), luakit.ErrKeepAliveRunning)
	release(t, l, lock.Released)
	require.True(t, errors.Is(l.Err(), lock.ErrReleased))
	e.requireAbsent(t, leaseKey, "lease")
}

// A waiter that died after its last renewal, before its turn: its entry and waiter key are live, so
// the release grants it the lease; the live waiter behind it takes the lease back at a renewal once
// the grant went unread for a quarter of the dead waiter's slice.
func testFairDeadGrantee(t *testing.T, e *env) {
	// life: what was left of the dead waiter's slice at the release (it renewed its entry just before
	// dying, or most of a slice before)
	for _, life := range []string{"2000", "300"} {
		t.Run("key_life_"+life+"ms", func(t *testing.T) { testFairDeadGranteeLife(t, e, life) })
	}
}

func testFairDeadGranteeLife(t *testing.T, e *env, life string) {
	c := ctx(t)
	name, leaseKey, _ := named("fair8:" + life)
	// Slices of 2 s (the live waiter renews every second): a loaded machine that delays a renewal by
	// most of a second neither lapses the live waiter nor lets the dead waiter's grant expire unseen.
	const slice = 2 * time.Second
	f := e.fair(t, lock.WithWaitSlice(slice))
	holder, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	dead := "0123456789abcdef0123456789abcdef"
	waiter := "{" + name + "}:waiter:" + dead
	e.do(t, "RPUSH", "{"+name+"}:queue", dead+":600000:2000")
	e.do(t, "SET", waiter, "1", "PX", "600000")
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := f.Acquire(c, name, 10*time.Second)
		assertNoError(t, err)
		got <- l
	}()
	e.waitQueue(t, name, 2)
	e.do(t, "PEXPIRE", waiter, life)
	release(t, holder, lock.Released)
	v, _ := e.get(t, leaseKey)
	require.Equal(t, dead, v, "granted to the dead waiter first")
	l := <-got
	require.NotNil(t, l)
	require.Equal(t, holder.FencingToken()+2, l.FencingToken(), "the dead waiter's token, then this one")
	e.requireLease(t, leaseKey, l.OwnerToken())
	require.EqualValues(t, -2, e.PTTL(t, waiter), "the dead waiter's key is deleted by its grant")
	require.EqualValues(t, -2, e.PTTL(t, waiter+":grant"), "the dead waiter's unread grant is deleted when taken back")
	release(t, l, lock.Released)
}

func testFairInspect(t *testing.T, e *env) {
	c := ctx(t)
	name, _, _ := named("fair9")
	f := e.fair(t, lock.WithWaitSlice(time.Minute))
	in, err := f.Inspect(c, name)
	require.NoError(t, err)
	require.Equal(t, lock.FairInspection{}, in, "a lock never taken")
	holder, err := f.TryAcquire(c, name, 10*time.Second)
	require.NoError(t, err)
	dead := "0123456789abcdef0123456789abcdef"
	e.do(t, "RPUSH", "{"+name+"}:queue", dead+":5000:1000")
	wctx, cancel := context.WithCancel(c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := f.Acquire(wctx, name, 3*time.Second)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("waiter: %v", err)
		}
	}()
	e.waitQueue(t, name, 2)
	in, err = f.Inspect(c, name)
	require.NoError(t, err)
	require.True(t, in.Exists)
	require.Equal(t, holder.FencingToken(), in.FencingToken)
	require.Equal(t, 2, in.Queued)
	require.Len(t, in.Waiters, 2)
	require.Equal(t, lock.QueuedWaiter{TTL: 5 * time.Second, Slice: time.Second}, in.Waiters[0], "an entry without a waiter key is not live")
	require.Equal(t, 3*time.Second, in.Waiters[1].TTL)
	require.Equal(t, time.Minute, in.Waiters[1].Slice)
	require.True(t, in.Waiters[1].Live)
	require.Positive(t, in.Waiters[1].Remaining)
	require.NotContains(t, fmt.Sprintf("%+v", in), holder.OwnerToken())
	cancel()
	<-done
	release(t, holder, lock.Released)
	in, err = f.Inspect(c, name)
	require.NoError(t, err)
	require.False(t, in.Exists)
	require.Zero(t, in.Queued, "the dead entry was skipped by the release")
}

// A waiter blocked in its pop (BLPOP, read on its own goroutine, which ctx cannot interrupt) returns
// as soon as its ctx ends, not when the server's block timeout (here 15 minutes) passes: the
// cancellation pushes a marker onto its grant list, and the cleanup leaves no key behind.
func testFairCancelBlocked(t *testing.T, e *env) {
	c := ctx(t)
	name, leaseKey, fenceKey := named("fair10")
	f := e.fair(t, lock.WithWaitSlice(time.Hour)) // block: a quarter of the TTL, 15 minutes
	holder, err := f.TryAcquire(c, name, 5*time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(c)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.Acquire(wctx, name, time.Hour)
		done <- err
	}()
	e.waitQueue(t, name, 1)
	require.Eventually(t, func() bool { return e.BlockedIn(t, "blpop") }, 10*time.Second, time.Millisecond, "the waiter never blocked in BLPOP")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire did not return 20 s after its ctx ended (its pop blocks for 15 minutes)")
	}
	require.Zero(t, e.queueLen(t, name))
	require.ElementsMatch(t, []string{leaseKey, fenceKey}, e.keysOf(t, name), "entry, waiter key and grant list removed")
	release(t, holder, lock.Released)
}

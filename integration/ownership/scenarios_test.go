package ownership_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Helpers shared by the scenarios.

// mustTry acquires with try and fails the test unless it succeeded.
func mustTry(t *testing.T, try acquireFunc, ttl time.Duration) handle {
	t.Helper()
	h, err := try(ctx(t), ttl)
	require.NoError(t, err)
	require.NotNil(t, h)
	require.NoError(t, h.Err(), "a new handle vouches")
	return h
}

// release releases h with a live ctx and asserts the outcome.
func release(t *testing.T, h handle, want ownership.Outcome) {
	t.Helper()
	out, err := h.Release(ctxFor(t, 10*time.Second))
	require.NoError(t, err)
	require.Equal(t, want, out, "release outcome")
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitDone waits up to within for h to end.
func waitDone(t *testing.T, h handle, within time.Duration, what string) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(within):
		t.Fatalf("%s: Done still open after %v (Err %v)", what, within, h.Err())
	}
}

// waitScripts waits until the servers ran at least n more scripts than in before (a command sent is on
// the server), for at most 5s. A SET counts as one: lock's renewal is SET ... IFEQ where the server
// has it, and no kind's renewal script runs SET.
func (e *env) waitScripts(t *testing.T, before map[string]int64, n int64, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := e.commands(t)
		if scripts(before, after)+after["set"]-before["set"] >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the command never reached the server", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// 1. Extend reply after the estimate elapsed: (false, nil), the handle ends with ErrExpired and
// surrenders the hold (an owner-checked release), so another owner can take it at once. TTL 300ms, the
// renewal sent 150ms before the estimate ends, its reply held 300ms by the proxy. With ExtendTTL(30s)
// the server would keep the renewed hold for 30s: only the surrender removes it.
func testLateRenewal(t *testing.T, e *env, k *kind) {
	for _, tc := range []struct {
		name   string
		extend func(context.Context, handle) (bool, error)
	}{
		{"extend", func(c context.Context, h handle) (bool, error) { return h.Extend(c) }},
		{"extend_ttl_30s", func(c context.Context, h handle) (bool, error) { return h.ExtendTTL(c, 30*time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := "late-renewal-" + tc.name + "-" + k.name
			ps, cs := e.proxied(t, k, res)
			f := k.newFactory(t, cs, res, factoryOptions{})
			h := mustTry(t, f.try, 300*time.Millisecond)
			// Renew once without delay, so the scripts are loaded (no NOSCRIPT round trip below).
			ok, err := h.Extend(ctx(t))
			require.NoError(t, err)
			require.True(t, ok)
			ps.delay(t, 300*time.Millisecond)
			time.Sleep(time.Until(h.Deadline().Add(-150 * time.Millisecond)))
			require.NoError(t, h.Err(), "the renewal must be sent while the estimate lasts (the machine stalled 150ms)")
			ok, err = tc.extend(ctx(t), h)
			require.NoError(t, err, "a late renewal reply is an answer, not an error")
			require.False(t, ok, "a renewal confirmed after the estimate elapsed is not a success")
			require.ErrorIs(t, h.Err(), luakit.ErrExpired)
			require.True(t, isClosed(h.Done()), "the handle ended")
			require.Zero(t, h.Remaining())
			e.eventuallyGone(t, k, res, 3*time.Second, "the late renewal's hold is surrendered")
			ps.reset(t)

			rival := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
			r := mustTry(t, rival.tryRival, 10*time.Second)
			release(t, r, ownership.Released)
			// The surrender was answered: nothing left to release, no I/O.
			release(t, h, ownership.AlreadyReleased)
			require.ErrorIs(t, h.Err(), luakit.ErrExpired, "the first cause is kept")
		})
	}
}

// 2. Release while an Extend is in flight (its reply held 500ms by the proxy) waits for it: the renewal
// completes as a success, then the release removes the hold and reports Released.
func testReleaseWaitsForRenewal(t *testing.T, e *env, k *kind) {
	res := "release-inflight-" + k.name
	ps, cs := e.proxied(t, k, res)
	f := k.newFactory(t, cs, res, factoryOptions{})
	h := mustTry(t, f.try, 10*time.Second)
	ps.delay(t, 500*time.Millisecond)

	type result struct {
		ok  bool
		err error
		at  time.Time
	}
	c := ctx(t)
	ext := make(chan result, 1)
	before := e.commands(t)
	go func() {
		ok, err := h.Extend(c)
		ext <- result{ok, err, time.Now()}
	}()
	// The renewal reached every server; its reply is held by the proxy.
	e.waitScripts(t, before, int64(len(cs)), "the renewal")
	out, err := h.Release(c)
	releasedAt := time.Now()
	require.NoError(t, err)
	require.Equal(t, ownership.Released, out)
	r := <-ext
	require.NoError(t, r.err, "the renewal in flight returns without error")
	require.True(t, r.ok, "the renewal in flight completes before the release ends the handle")
	require.False(t, r.at.After(releasedAt), "Release returned before the renewal it must wait for")
	require.ErrorIs(t, h.Err(), luakit.ErrReleased)
	ps.reset(t)
	e.requireGone(t, k, res, "after the release")
}

// 3. Eight concurrent Release calls: exactly one reports Released, the others AlreadyReleased without
// sending anything (one release script per server in all).
func testConcurrentRelease(t *testing.T, e *env, k *kind) {
	res := "concurrent-release-" + k.name
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	servers := int64(len(e.place(t, k, res)))
	for round := range 5 {
		h := mustTry(t, f.try, 10*time.Second)
		before := e.commands(t)
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			outs  [8]ownership.Outcome
			errs  [8]error
		)
		c := ctx(t)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outs[i], errs[i] = h.Release(c)
			}()
		}
		close(start)
		wg.Wait()
		counts := map[ownership.Outcome]int{}
		for i := range outs {
			require.NoError(t, errs[i], "round %d, call %d", round, i)
			counts[outs[i]]++
		}
		require.Equal(t, map[ownership.Outcome]int{ownership.Released: 1, ownership.AlreadyReleased: 7}, counts, "round %d", round)
		if round > 0 { // round 0 loads the release script (EVALSHA, NOSCRIPT, EVAL)
			require.Equal(t, servers, scripts(before, e.commands(t)), "round %d: one release sent, the others answered without I/O", round)
		}
		require.ErrorIs(t, h.Err(), luakit.ErrReleased)
		e.requireGone(t, k, res, fmt.Sprintf("round %d", round))
	}
}

// 4. Release with a ctx that already ended: an error wrapping context.Canceled (not ErrUncertain:
// nothing was sent), the handle still vouches and the hold is still on the server; a later Release
// with a live ctx removes it.
func testReleaseCancelled(t *testing.T, e *env, k *kind) {
	res := "release-cancelled-" + k.name
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h := mustTry(t, f.try, 10*time.Second)
	done, hctx := h.Done(), h.Context()

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := h.Release(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, luakit.ErrUncertain, "nothing was sent: the outcome is known")
	require.Zero(t, out, "no outcome with an error")
	require.NoError(t, h.Err(), "the handle still vouches")
	require.False(t, isClosed(done), "Done stays open")
	require.NoError(t, hctx.Err())
	require.Positive(t, h.Remaining())
	e.requireHeld(t, k, res, "after the cancelled release")
	ok, err := h.Verify(ctx(t))
	require.NoError(t, err)
	require.True(t, ok, "the handle is usable")

	release(t, h, ownership.Released)
	require.ErrorIs(t, h.Err(), luakit.ErrReleased)
	require.True(t, isClosed(done))
	e.requireGone(t, k, res, "after the release")
}

// 5. Verify when the hold was deleted externally: (false, nil), the handle ends with ErrLost; a later
// Release finds nothing of this owner.
func testVerifyLost(t *testing.T, e *env, k *kind) {
	res := "verify-lost-" + k.name
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h := mustTry(t, f.try, 10*time.Second)
	ok, err := h.Verify(ctx(t))
	require.NoError(t, err)
	require.True(t, ok)

	e.removeHold(t, k, res)
	ok, err = h.Verify(ctx(t))
	require.NoError(t, err, "an absent hold is an answer, not an error")
	require.False(t, ok)
	require.ErrorIs(t, h.Err(), luakit.ErrLost)
	require.True(t, isClosed(h.Done()))
	require.ErrorIs(t, context.Cause(h.Context()), luakit.ErrLost)
	require.Zero(t, h.Remaining())
	release(t, h, ownership.NotOwned)
	require.ErrorIs(t, h.Err(), luakit.ErrLost, "the first cause is kept")
}

// 6. An acquisition that times out on a paused server is uncertain, and its owner-checked cleanup runs
// after it once the server resumes, so no hold is left. Ten trials, each on new clients with rueidis'
// default connections (2^PipelineMultiplex per server: two on two CPUs, spread at random by keyed
// commands; a cluster client has one per node), every one of them dialled beforehand, so that a
// cleanup sent on another connection than its acquisition could overtake it. On a cluster the key's
// primary is paused; for redlock every server of the group.
func testCleanupInOrder(t *testing.T, e *env, k *kind) {
	res := "in-order-" + k.name
	nodes := e.place(t, k, res)
	resume := func() {
		for _, s := range nodes {
			s.MustResume(t)
		}
	}
	t.Cleanup(resume) // resuming a running server does nothing
	for trial := range 10 {
		cs := e.clients(t, k, plain, matrix.NoCache)
		f := k.newFactory(t, cs, res, factoryOptions{cleanupTimeout: 100 * time.Millisecond})
		// Load the scripts (no NOSCRIPT round trip below) and the factory's feature probe (lease).
		release(t, mustTry(t, f.try, time.Minute), ownership.Released)
		for _, c := range cs {
			for range 8 { // each keyed command takes a connection at random
				require.NoError(t, c.Do(ctx(t), c.B().Get().Key(k.slotKey(res)+":dial").Build()).NonRedisError())
			}
		}

		for _, s := range nodes {
			s.MustPause(t)
		}
		actx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		h, err := f.try(actx, time.Minute)
		cancel()
		resume()
		require.Nil(t, h, "trial %d", trial)
		require.ErrorIs(t, err, luakit.ErrUncertain, "trial %d: a timed-out acquisition is uncertain", trial)
		for _, c := range cs {
			matrix.WaitServing(t, c)
		}
		// A cleanup that overtook the acquisition would leave the hold for its whole minute.
		e.eventuallyGone(t, k, res, 2*time.Second,
			fmt.Sprintf("trial %d: the cleanup must run after the late acquisition and remove its hold", trial))
	}
}

// 7. KeepAlive renews past the TTL; when the hold is deleted externally and another owner takes it,
// the handle ends with ErrLost within a few renew periods and its keep-alive goroutine exits (TestMain
// checks for leaks); the new owner's hold is left intact.
func testKeepAliveLoss(t *testing.T, e *env, k *kind) {
	res := "keepalive-loss-" + k.name
	const ttl = 1200 * time.Millisecond // renewed every 400ms
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h := mustTry(t, f.try, ttl)
	kctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, h.KeepAlive(kctx))
	require.ErrorIs(t, h.KeepAlive(kctx), luakit.ErrKeepAliveRunning)
	time.Sleep(ttl + 200*time.Millisecond)
	require.NoError(t, h.Err(), "the keep-alive holds past the TTL")
	e.requireHeld(t, k, res, "while renewed")

	e.removeHold(t, k, res)
	rival := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	r := mustTry(t, rival.tryRival, 30*time.Second)
	waitDone(t, h, 5*time.Second, "after the hold was taken by another owner")
	require.ErrorIs(t, h.Err(), luakit.ErrLost)
	require.ErrorIs(t, h.KeepAlive(kctx), luakit.ErrLost, "KeepAlive on an ended handle returns its cause")
	release(t, h, ownership.NotOwned)
	e.requireHeld(t, k, res, "the new owner's hold is intact")
	release(t, r, ownership.Released)
}

// 8. Done and Context are one channel and one context for the handle's whole life: the same before and
// after a renewal, after expiry, and after a later Extend and Verify, which return false without I/O.
func testDoneFixed(t *testing.T, e *env, k *kind) {
	res := "done-fixed-" + k.name
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h := mustTry(t, f.try, 400*time.Millisecond)
	done, hctx := h.Done(), h.Context()
	same := func(when string) {
		t.Helper()
		require.True(t, done == h.Done(), "%s: Done returned another channel", when)
		require.True(t, hctx == h.Context(), "%s: Context returned another context", when)
	}
	ok, err := h.Extend(ctx(t))
	require.NoError(t, err)
	require.True(t, ok)
	same("after Extend")
	require.False(t, isClosed(done))

	waitDone(t, h, 5*time.Second, "after the TTL")
	require.ErrorIs(t, h.Err(), luakit.ErrExpired)
	require.ErrorIs(t, context.Cause(hctx), luakit.ErrExpired)
	same("after expiry")

	before := e.commands(t)
	ok, err = h.Extend(ctx(t))
	require.NoError(t, err)
	require.False(t, ok, "Extend on an ended handle")
	ok, err = h.Verify(ctx(t))
	require.NoError(t, err)
	require.False(t, ok, "Verify on an ended handle")
	require.Zero(t, renewals(before, e.commands(t)), "Extend and Verify on an ended handle send nothing")
	same("after a later Extend")
	require.ErrorIs(t, h.Err(), luakit.ErrExpired)
	require.Zero(t, h.Remaining())
}

type acquired struct {
	h   handle
	err error
}

// 9. A waiting acquisition on a client from luakit.NewTrackedClient (no tracker option: the module
// finds the tracker itself) is woken when the holder (TTL 30s) releases, well within its 5s ctx.
func testWaitRelease(t *testing.T, e *env, k *kind) {
	res := "wait-release-" + k.name
	holderF := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	holder := mustTry(t, holderF.tryRival, 30*time.Second)
	waiterF := k.newFactory(t, e.clients(t, k, tracked), res, factoryOptions{})

	got := make(chan acquired, 1)
	wctx := ctxFor(t, 5*time.Second)
	go func() {
		h, err := waiterF.acquire(wctx, 10*time.Second)
		got <- acquired{h, err}
	}()
	time.Sleep(300 * time.Millisecond) // the waiter tried and sleeps
	select {
	case a := <-got:
		t.Fatalf("the waiter returned while the resource was held: %v", a.err)
	default:
	}
	released := time.Now()
	release(t, holder, ownership.Released)
	a := <-got
	require.NoError(t, a.err, "the release must wake the waiter (without tracking it sleeps until the holder's 30s TTL)")
	t.Logf("hand-off after release: %v", time.Since(released))
	release(t, a.h, ownership.Released)
}

// 10. A waiting acquisition is woken by the holder's expiry (TTL 300ms, never released), here on a
// client without tracking: it sleeps for the holder's TTL.
func testWaitExpiry(t *testing.T, e *env, k *kind) {
	res := "wait-expiry-" + k.name
	holderF := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	holder := mustTry(t, holderF.tryRival, 300*time.Millisecond)
	waiterF := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	start := time.Now()
	h, err := waiterF.acquire(ctxFor(t, 5*time.Second), 10*time.Second)
	require.NoError(t, err, "the holder's expiry must wake the waiter")
	t.Logf("acquired %v after the holder's 300ms hold began", time.Since(start))
	require.ErrorIs(t, holder.Err(), luakit.ErrExpired, "the holder's estimate ended first")
	release(t, holder, ownership.NotOwned)
	e.requireHeld(t, k, res, "the old holder's release leaves the new owner's hold")
	release(t, h, ownership.Released)
}

// 11. A waiter does not poll: waiting 1s on a holder of 10s costs the servers a small constant number
// of commands (an attempt and arming tracking), not one per retry period.
func testWaitNoPoll(t *testing.T, e *env, k *kind) {
	res := "wait-no-poll-" + k.name
	holderF := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	holder := mustTry(t, holderF.tryRival, 10*time.Second)
	waiterF := k.newFactory(t, e.clients(t, k, tracked), res, factoryOptions{})

	before := e.commands(t)
	h, err := waiterF.acquire(ctxFor(t, time.Second), 10*time.Second)
	after := e.commands(t)
	require.Nil(t, h)
	require.ErrorIs(t, err, context.DeadlineExceeded, "ctx ended while waiting")
	if k.retriesEvery == 0 {
		// Sleeping on the holder's invalidation, the waiter has no attempt in flight when ctx ends.
		// A kind that retries on a timer (redlock) can be mid-attempt then: its error is uncertain.
		require.NotErrorIs(t, err, luakit.ErrUncertain, "no attempt was in flight")
	}
	// INFO commandstats counts the commands scripts call too, so the attempts are the scripts run
	// (one per server of the hold for each try) and the total is bounded loosely: a waiter retrying
	// every 10ms would run about 100 attempts, each with several commands.
	d := e.CommandsBetween(before, after)
	n := matrix.Total(d)
	attempts := scripts(before, after)
	servers := int64(len(e.place(t, k, res)))
	t.Logf("while waiting 1s: %d attempts on %d servers, %d commands %v", attempts, servers, n, d)
	if k.retriesEvery > 0 {
		// The kind's documented exception: at most one attempt (a try and its cleanup, one script
		// each per server) per retriesEvery/2, plus the first.
		most := (int64(time.Second/(k.retriesEvery/2)) + 1) * 2 * servers
		t.Logf("contract exception: %s retries every %v on average instead of waiting on invalidations", k.name, k.retriesEvery)
		require.LessOrEqual(t, attempts, most, "more attempts than the documented retry delay allows: %v", d)
		require.Positive(t, attempts)
	} else {
		require.LessOrEqual(t, attempts, 3*servers, "the waiter polled: %d attempts in 1s (%v)", attempts, d)
		require.LessOrEqual(t, n, int64(40)*servers, "the waiter polled: %v", d)
	}
	release(t, holder, ownership.Released)
}

// 12. An Extend whose ctx ends while the reply is held (the proxy delays it 1s) is uncertain: the
// handle keeps vouching until its previous estimate (lowered for a shorter TTL), and stays usable.
func testUncertainExtend(t *testing.T, e *env, k *kind) {
	res := "uncertain-extend-" + k.name
	ps, cs := e.proxied(t, k, res)
	f := k.newFactory(t, cs, res, factoryOptions{})
	h := mustTry(t, f.try, 5*time.Second)
	deadline := h.Deadline()
	ps.delay(t, time.Second)

	ok, err := h.Extend(ctxFor(t, 200*time.Millisecond))
	require.False(t, ok)
	require.ErrorIs(t, err, luakit.ErrUncertain)
	require.NoError(t, h.Err(), "an uncertain renewal does not end the handle")
	require.False(t, isClosed(h.Done()))
	require.Positive(t, h.Remaining())
	require.True(t, h.Deadline().Equal(deadline), "the estimate stays the previous one: %v, was %v", h.Deadline(), deadline)

	// A shorter TTL lowers the estimate to the new renewal's send time + TTL.
	ok, err = h.ExtendTTL(ctxFor(t, 200*time.Millisecond), 3*time.Second)
	returned := time.Now()
	require.False(t, ok)
	require.ErrorIs(t, err, luakit.ErrUncertain)
	require.NoError(t, h.Err())
	require.True(t, h.Deadline().Before(deadline), "a shorter uncertain renewal lowers the estimate")
	require.False(t, h.Deadline().After(returned.Add(3*time.Second)), "lowered to the renewal's send time + TTL")
	require.Positive(t, h.Remaining())

	ps.reset(t)
	ok, err = h.Verify(ctx(t))
	require.NoError(t, err)
	require.True(t, ok, "the handle is usable after an uncertain renewal")
	release(t, h, ownership.Released)
	e.requireGone(t, k, res, "after the release")
}

// 13. A try-acquisition of a held resource fails with luakit.ErrNotAcquired whatever the kind; a kind
// the server cannot offer fails with its unsupported error, before writing.
func testErrorsShared(t *testing.T, e *env, k *kind) {
	res := "errors-shared-" + k.name
	if why := k.needs(e); why != "" {
		f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
		h, err := f.try(ctx(t), 10*time.Second)
		require.Nil(t, h)
		require.ErrorIs(t, err, k.unsupported, "%s", why)
		e.requireGone(t, k, res, "an unsupported acquisition writes nothing")
		return
	}
	holderF := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	holder := mustTry(t, holderF.tryRival, 10*time.Second)
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h, err := f.try(ctx(t), 10*time.Second)
	require.Nil(t, h)
	require.ErrorIs(t, err, luakit.ErrNotAcquired)
	require.False(t, errors.Is(err, luakit.ErrUncertain), "a refusal is certain")
	release(t, holder, ownership.Released)
}

// 14. A key holding another Redis type is foreign data: the try-acquisition fails with an error that
// matches luakit.ErrForeignData and leaves the value alone. A lock's and a redlock's hold is a plain
// string, so there a foreign string reads as another owner's hold (ErrNotAcquired), as their package
// docs say; the value is left alone too.
func testForeignData(t *testing.T, e *env, k *kind) {
	res := "foreign-" + k.name
	c := ctx(t)
	for _, raw := range e.raws(k) {
		require.NoError(t, raw.Do(c, raw.B().Set().Key(k.slotKey(res)).Value("not-ours").Build()).Error())
	}
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h, err := f.try(c, 10*time.Second)
	require.Nil(t, h)
	if k.foreignIsHeld {
		require.ErrorIs(t, err, luakit.ErrNotAcquired)
	} else {
		require.ErrorIs(t, err, luakit.ErrForeignData)
		require.False(t, errors.Is(err, luakit.ErrUncertain), "a WRONGTYPE reply is certain")
	}
	for _, raw := range e.raws(k) {
		v, err := raw.Do(c, raw.B().Get().Key(k.slotKey(res)).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, "not-ours", v, "the foreign value is left alone")
		require.NoError(t, raw.Do(c, raw.B().Del().Key(k.slotKey(res)).Build()).Error())
	}
}

// refusalCounter forwards to a real client and counts the commands that failed because no connection
// could be made (luakit.NotSent): the way a scenario knows an acquisition met a refused dial.
type refusalCounter struct {
	rueidis.Client
	refused atomic.Int64
}

func (c *refusalCounter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r := c.Client.Do(ctx, cmd)
	if luakit.NotSent(r.Error()) {
		c.refused.Add(1)
	}
	return r
}

// 15. A connection that cannot be made is a failure, not an uncertain outcome: nothing was sent. Every
// proxy refuses connections (and each client has already met a refused dial: the first command after
// the cut may have been written to the closing connection, and that one is uncertain). A
// try-acquisition then fails with a transient error that does not match luakit.ErrUncertain and
// leaves no hold; a waiting acquisition retries it within its ctx (it met at least one more refused
// dial) and gets the hold once the proxies accept again.
func testRefusedConnection(t *testing.T, e *env, k *kind) {
	res := "refused-" + k.name
	ps, raw := e.proxied(t, k, res)
	var counters []*refusalCounter
	cs := make([]rueidis.Client, len(raw))
	for i, c := range raw {
		counters = append(counters, &refusalCounter{Client: c})
		cs[i] = counters[i]
	}
	f := k.newFactory(t, cs, res, factoryOptions{})
	for _, p := range ps {
		require.NoError(t, p.Refuse())
	}
	t.Cleanup(func() {
		for _, p := range ps {
			_ = p.Accept()
		}
	})
	for _, c := range cs {
		require.Eventually(t, func() bool {
			return luakit.NotSent(c.Do(ctx(t), c.B().Ping().Build()).Error())
		}, 10*time.Second, 10*time.Millisecond, "the client never met a refused dial")
	}

	h, err := f.try(ctx(t), 10*time.Second)
	require.Nil(t, h)
	require.Error(t, err)
	require.False(t, errors.Is(err, luakit.ErrUncertain), "nothing was sent: %v", err)
	require.True(t, luakit.IsTransient(err), "a refused connection is worth a retry: %v", err)
	e.requireGone(t, k, res, "after the refused try-acquisition")

	type acquired struct {
		h   handle
		err error
	}
	before := counters[0].refused.Load()
	got := make(chan acquired, 1)
	go func() {
		h, err := f.acquire(ctxFor(t, 30*time.Second), 10*time.Second)
		got <- acquired{h, err}
	}()
	require.Eventually(t, func() bool { return counters[0].refused.Load() > before }, 10*time.Second,
		time.Millisecond, "the waiting acquisition never met the refused connection")
	for _, p := range ps {
		require.NoError(t, p.Accept())
	}
	a := <-got
	require.NoError(t, a.err, "the waiting acquisition retries a refused connection")
	require.NotNil(t, a.h)
	e.requireHeld(t, k, res, "after the retried acquisition")
	release(t, a.h, ownership.Released)
	e.requireGone(t, k, res, "after the release")
}

// setHz sets every server process's hz (how often active expiry runs) for the test, restoring the
// previous value at cleanup.
func (e *env) setHz(t *testing.T, hz string) {
	t.Helper()
	for _, s := range e.servers() {
		c := s.Client(t, matrix.NoCache)
		kv, err := c.Do(ctx(t), c.B().ConfigGet().Parameter("hz").Build()).AsStrMap()
		require.NoError(t, err)
		require.NoError(t, c.Do(ctx(t), c.B().ConfigSet().ParameterValue().ParameterValue("hz", hz).Build()).Error())
		t.Cleanup(func() {
			_ = c.Do(context.Background(), c.B().ConfigSet().ParameterValue().ParameterValue("hz", kv["hz"]).Build()).Error()
		})
	}
}

// 16. The local estimate never outlives the server's hold, at the expiry hand-off: with active expiry
// at hz 500 (every 2ms), a hold acquired with a 30ms TTL and never renewed is contended from 2ms
// before its Deadline() by try-acquisitions of a rival; no rival grant whose reply arrived before
// the holder's Deadline() may exist (such a grant certainly ran before it). Redis 8 expires a key
// within the millisecond of its expiry time, from a truncated clock: without ServerClockStep the
// estimate outlived the hold there in some of these hand-offs.
func testHandOffAfterDeadline(t *testing.T, e *env, k *kind) {
	const rounds = 25
	ttl := 30 * time.Millisecond
	if k.quorum {
		ttl = 200 * time.Millisecond // three nodes: leave validity on a loaded machine
	}
	e.setHz(t, "500")
	res := "hand-off-" + k.name
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	early, worst := 0, time.Duration(0)
	for range rounds {
		// The property is about granted holds: an attempt whose reply came too late to leave any
		// validity (a loaded machine) is not one, so try again.
		var holder handle
		for attempt := 0; holder == nil; attempt++ {
			h, err := f.try(ctx(t), ttl)
			switch {
			case err == nil:
				holder = h
			case attempt < 20 && (errors.Is(err, luakit.ErrNotAcquired) || errors.Is(err, luakit.ErrLateReply)):
				time.Sleep(ttl) // a rival's or our own late hold expires meanwhile
			default:
				require.NoError(t, err, "attempt %d", attempt)
			}
		}
		dl := holder.Deadline()
		time.Sleep(time.Until(dl.Add(-2 * time.Millisecond)))
		for {
			rival, err := f.tryRival(ctx(t), 10*time.Second)
			at := time.Now()
			if err == nil {
				if at.Before(dl) {
					early++
					worst = max(worst, dl.Sub(at))
				}
				require.ErrorIs(t, holder.Err(), luakit.ErrExpired, "the holder's estimate elapsed by now")
				release(t, rival, ownership.Released)
				break
			}
			require.ErrorIs(t, err, luakit.ErrNotAcquired)
			require.Less(t, time.Since(dl), 5*time.Second, "the hold never expired")
		}
	}
	require.Zero(t, early, "%d of %d rivals were granted before the holder's Deadline() (up to %v early)",
		early, rounds, worst)
}

// 17. Close, the same for every kind: on a held handle it sends one release (per server), returns nil
// and ends the handle with ErrReleased, stopping a running keep-alive; a second Close, and a Close
// after an answered Release, return nil without I/O; a Close whose reply does not come within the
// cleanup timeout returns an error wrapping ErrUncertain and the handle has ended, and the hold is
// removed once the reply path works again (the release was sent; the semaphore retries it).
func testClose(t *testing.T, e *env, k *kind) {
	res := "close-" + k.name
	ps, cs := e.proxied(t, k, res)
	f := k.newFactory(t, cs, res, factoryOptions{cleanupTimeout: 300 * time.Millisecond})
	servers := int64(len(e.place(t, k, res)))

	warm := mustTry(t, f.try, 10*time.Second) // loads the release script
	release(t, warm, ownership.Released)

	h := mustTry(t, f.try, 10*time.Second)
	require.NoError(t, h.KeepAlive(context.Background()))
	before := e.commands(t)
	require.NoError(t, h.Close())
	require.Equal(t, servers, scripts(before, e.commands(t)), "one release script per server")
	require.ErrorIs(t, h.Err(), luakit.ErrReleased)
	require.True(t, isClosed(h.Done()))
	e.requireGone(t, k, res, "after Close")
	before = e.commands(t)
	require.NoError(t, h.Close(), "a second Close")
	out, err := h.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, ownership.AlreadyReleased, out)
	require.Zero(t, scripts(before, e.commands(t)), "no I/O once settled")

	h = mustTry(t, f.try, 10*time.Second)
	ps.delay(t, time.Second)
	err = h.Close()
	require.ErrorIs(t, err, luakit.ErrUncertain, "no reply within the cleanup timeout")
	require.ErrorIs(t, h.Err(), luakit.ErrReleased, "the release was sent")
	ps.reset(t)
	e.eventuallyGone(t, k, res, 10*time.Second, "after the delayed Close")
}

// 18. KeepAlive renews by the hold's current deadline: started with a third of a period left it renews
// at once, and after a confirmed ExtendTTL to a TTL shorter than its period it renews by the new TTL.
// In both phases the handle keeps vouching and a rival never gets in, for several TTLs.
func testKeepAliveSchedule(t *testing.T, e *env, k *kind) {
	res := "keepalive-schedule-" + k.name
	f := k.newFactory(t, e.clients(t, k, plain), res, factoryOptions{})
	h := mustTry(t, f.try, 1500*time.Millisecond) // renew period 500ms
	time.Sleep(time.Until(h.Deadline().Add(-170 * time.Millisecond)))
	kctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, h.KeepAlive(kctx), "a third of a period left")
	holdAgainstRival(t, f, h, 1500*time.Millisecond, "KeepAlive started late")

	ok, err := h.ExtendTTL(ctx(t), 450*time.Millisecond) // shorter than the period it renewed at
	require.NoError(t, err)
	require.True(t, ok)
	holdAgainstRival(t, f, h, 1350*time.Millisecond, "after ExtendTTL to a shorter TTL")
	require.Equal(t, 450*time.Millisecond, h.TTL())
	release(t, h, ownership.Released)
}

// holdAgainstRival checks for d that h keeps vouching and that a rival's try-acquisition is refused
// (every 100ms).
func holdAgainstRival(t *testing.T, f *factory, h handle, d time.Duration, what string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		require.NoError(t, h.Err(), "%s: the kept-alive handle must vouch", what)
		rival, err := f.tryRival(ctx(t), 10*time.Second)
		if err == nil {
			_, _ = rival.Release(ctx(t))
			t.Fatalf("%s: a rival acquired the kept-alive hold", what)
		}
		require.ErrorIs(t, err, luakit.ErrNotAcquired, what)
	}
	require.NoError(t, h.Err(), "%s: the kept-alive handle must vouch", what)
}

package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// limiterQueueScenarios returns the scenarios of this file.
func limiterQueueScenarios() []scenario {
	return []scenario{
		{Name: "limiter_queue_order_oldest_first", Run: testLimiterQueueOldestFirst},
		{Name: "limiter_queue_order_newest_first", Run: testLimiterQueueNewestFirst},
		{Name: "limiter_queue_limit_and_oversized", Run: testLimiterQueueLimit},
		{Name: "limiter_queue_eviction", Run: testLimiterQueueEviction},
		{Name: "limiter_queue_cancel_and_close", Run: testLimiterQueueCancelClose},
		{Name: "limiter_queue_wake_on_update", Run: testLimiterQueueWakeOnUpdate},
		{Name: "limiter_queue_update_during_attempt", Run: testLimiterQueueUpdateDuringAttempt},
		{Name: "limiter_queue_deny_list_recheck", Run: testLimiterQueueDenyRecheck},
	}
}

// queueGCRA admits one permit per 300ms with a burst of 1: each queued request needs its own
// emission interval, so the order of admissions is visible in their server decision times.
var queueGCRA = ratelimit.GCRA{Burst: 1, EmissionInterval: 300 * time.Millisecond}

// Three requests queue behind an exhausted limiter in the order a, b, c; OldestFirst admits them in
// that order (by server decision time), each after its own emission interval, with no rejection.
func testLimiterQueueOldestFirst(t *testing.T, e *env) {
	l := e.limiter(t, nil, e.key(t), queueGCRA, ratelimit.WithQueue(10, ratelimit.OldestFirst))
	limExhaust(t, l, 1)
	c := ctx(t)
	var chans []<-chan limOutcome
	for i, name := range []string{"a", "b", "c"} {
		chans = append(chans, limWaitAsync(c, l, name, 1))
		limWaitQueued(t, l, int64(i+1))
	}
	var prev time.Time
	for _, ch := range chans {
		o := limRecv(t, ch)
		require.NoError(t, o.err, o.name)
		require.True(t, o.res.Allowed, "%s: %+v", o.name, o.res)
		require.True(t, o.res.At.After(prev), "%s admitted at %v, not after the previous one (%v)", o.name, o.res.At, prev)
		prev = o.res.At
	}
	st := l.Stats()
	require.Equal(t, int64(4), st.Granted)
	require.Zero(t, st.Rejected)
	require.Zero(t, st.Queued)
}

// NewestFirst serves the latest arrival first: a, b, c queued in that order are admitted c, b, a.
func testLimiterQueueNewestFirst(t *testing.T, e *env) {
	l := e.limiter(t, nil, e.key(t), queueGCRA, ratelimit.WithQueue(10, ratelimit.NewestFirst))
	limExhaust(t, l, 1)
	c := ctx(t)
	chans := map[string]<-chan limOutcome{}
	for i, name := range []string{"a", "b", "c"} {
		chans[name] = limWaitAsync(c, l, name, 1)
		limWaitQueued(t, l, int64(i+1))
	}
	got := map[string]time.Time{}
	for name, ch := range chans {
		o := limRecv(t, ch)
		require.NoError(t, o.err, name)
		require.True(t, o.res.Allowed, "%s: %+v", name, o.res)
		got[name] = o.res.At
	}
	require.True(t, got["c"].Before(got["b"]), "c (%v) before b (%v)", got["c"], got["b"])
	require.True(t, got["b"].Before(got["a"]), "b (%v) before a (%v)", got["b"], got["a"])
}

// The queue limit counts permits: with room for 2, a third waiting permit is rejected at once with
// ReasonCapacity (OldestFirst: requests already waiting keep their place). A request above the queue
// limit is decided once and never queued; a request above the capacity is rejected without
// RetryAfter and without a script.
func testLimiterQueueLimit(t *testing.T, e *env) {
	fw := ratelimit.FixedWindow{Limit: 3, Window: time.Minute}
	l := e.limiter(t, nil, e.key(t), fw, ratelimit.WithQueue(2, ratelimit.OldestFirst))
	limExhaust(t, l, 3)
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	a := limWaitAsync(c, l, "a", 1)
	limWaitQueued(t, l, 1)
	b := limWaitAsync(c, l, "b", 1)
	limWaitQueued(t, l, 2)

	res, err := l.WaitN(ctx(t), 1) // queue full
	require.ErrorIs(t, err, ratelimit.ErrQueueFull)
	require.False(t, res.Allowed)
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)

	res, err = l.WaitN(ctx(t), 3) // above the queue limit, within the capacity: one decision
	require.ErrorIs(t, err, ratelimit.ErrQueueFull)
	require.False(t, res.Allowed)
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	require.Positive(t, res.RetryAfter, "the decision's RetryAfter is kept")
	require.Equal(t, int64(2), l.Stats().Queued, "never queued")

	before := limScripts(t, e)
	res, err = l.WaitN(ctx(t), 4) // above the capacity
	require.ErrorIs(t, err, ratelimit.ErrExceedsCapacity)
	require.False(t, res.Allowed)
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	require.Zero(t, res.RetryAfter)
	require.Equal(t, before, limScripts(t, e), "no script for a request above the capacity")

	cancel()
	for _, ch := range []<-chan limOutcome{a, b} {
		o := limRecv(t, ch)
		require.ErrorIs(t, o.err, context.Canceled, o.name)
	}
	st := l.Stats()
	require.Equal(t, int64(1), st.Granted)
	require.Equal(t, int64(3), st.Rejected, "cancelled waiters are not counted")
	require.Zero(t, st.Queued)
}

// NewestFirst with a full queue evicts the oldest waiters to make room: a is rejected with
// ReasonCapacity when c arrives; then c and b are admitted, newest first.
func testLimiterQueueEviction(t *testing.T, e *env) {
	l := e.limiter(t, nil, e.key(t), queueGCRA, ratelimit.WithQueue(2, ratelimit.NewestFirst))
	limExhaust(t, l, 1)
	c := ctx(t)
	a := limWaitAsync(c, l, "a", 1)
	limWaitQueued(t, l, 1)
	b := limWaitAsync(c, l, "b", 1)
	limWaitQueued(t, l, 2)
	cc := limWaitAsync(c, l, "c", 1)

	oa := limRecv(t, a)
	require.ErrorIs(t, oa.err, ratelimit.ErrQueueFull)
	require.False(t, oa.res.Allowed, "a was evicted")
	require.Equal(t, ratelimit.ReasonCapacity, oa.res.Reason)
	oc, ob := limRecv(t, cc), limRecv(t, b)
	require.NoError(t, oc.err)
	require.NoError(t, ob.err)
	require.True(t, oc.res.Allowed && ob.res.Allowed, "c %+v, b %+v", oc.res, ob.res)
	require.True(t, oc.res.At.Before(ob.res.At), "c (%v) before b (%v)", oc.res.At, ob.res.At)
	st := l.Stats()
	require.Equal(t, int64(3), st.Granted)
	require.Equal(t, int64(1), st.Rejected)
}

// A cancelled waiter leaves the queue with ctx's error and is not counted; Close fails the remaining
// waiters with ErrClosed, and later calls return ErrClosed.
func testLimiterQueueCancelClose(t *testing.T, e *env) {
	key := e.key(t)
	l, err := ratelimit.New(e.NewClient(t, nil, matrix.NoCache), key, ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithQueue(5, ratelimit.OldestFirst))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	limExhaust(t, l, 1)

	cctx, cancel := context.WithCancel(ctx(t))
	a := limWaitAsync(cctx, l, "a", 1)
	limWaitQueued(t, l, 1)
	b := limWaitAsync(ctx(t), l, "b", 1)
	limWaitQueued(t, l, 2)
	cancel()
	oa := limRecv(t, a)
	require.ErrorIs(t, oa.err, context.Canceled)
	limWaitQueued(t, l, 1)

	require.NoError(t, l.Close(context.Background()))
	ob := limRecv(t, b)
	require.ErrorIs(t, ob.err, ratelimit.ErrClosed)
	_, err = l.AllowN(ctx(t), 1)
	require.ErrorIs(t, err, ratelimit.ErrClosed)
	_, err = l.WaitN(ctx(t), 1)
	require.ErrorIs(t, err, ratelimit.ErrClosed)
	st := l.Stats()
	require.Equal(t, int64(1), st.Granted)
	require.Zero(t, st.Rejected, "cancelled and closed waiters are not outcomes")
	require.Zero(t, st.Queued)
	require.NoError(t, l.Close(context.Background()), "Close is idempotent")
}

// An Update wakes the queue at once. A fixed window of 4 per minute is exhausted; a waiter of 1
// permit (RetryAfter about a minute) and a waiter of 3 permits queue. Migrating to a limit of 2
// rejects the 3-permit waiter, now above the capacity, without RetryAfter; the other keeps its place.
// Migrating to a limit of 5 (the count and the deadline are kept) admits it in the same window: its
// server decision time is before the end of the window of the first admission.
func testLimiterQueueWakeOnUpdate(t *testing.T, e *env) {
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 4, Window: time.Minute},
		ratelimit.WithQueue(10, ratelimit.OldestFirst))
	first := limExhaust(t, l, 4)
	c := ctx(t)
	small := limWaitAsync(c, l, "small", 1)
	limWaitQueued(t, l, 1)
	big := limWaitAsync(c, l, "big", 3)
	limWaitQueued(t, l, 4)

	require.NoError(t, l.Update(ctx(t), ratelimit.FixedWindow{Limit: 2, Window: time.Minute}, ratelimit.Migrate))
	ob := limRecv(t, big)
	require.ErrorIs(t, ob.err, ratelimit.ErrExceedsCapacity)
	require.False(t, ob.res.Allowed)
	require.Equal(t, ratelimit.ReasonCapacity, ob.res.Reason)
	require.Zero(t, ob.res.RetryAfter, "above the new capacity: no retry can succeed")
	limWaitQueued(t, l, 1)

	require.NoError(t, l.Update(ctx(t), ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, ratelimit.Migrate))
	os := limRecv(t, small)
	require.NoError(t, os.err)
	require.True(t, os.res.Allowed, "%+v", os.res)
	require.True(t, os.res.At.Before(first.At.Add(time.Minute)),
		"admitted at %v, within the window that started at %v", os.res.At, first.At)
	require.Zero(t, os.res.Remaining)
	require.Zero(t, l.Stats().Queued)
}

// heldClient forwards every command to the real server. Once armed, the reply of the next command is
// held, after the server ran it, until release is closed: an attempt stays in flight as long as the
// test wants, with its outcome already decided on the server.
type heldClient struct {
	rueidis.Client
	armed   atomic.Bool
	held    chan struct{} // closed when a reply is held
	release chan struct{}
}

func newHeldClient(c rueidis.Client) *heldClient {
	return &heldClient{Client: c, held: make(chan struct{}), release: make(chan struct{})}
}

func (c *heldClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	res := c.Client.Do(ctx, cmd)
	if c.armed.CompareAndSwap(true, false) {
		close(c.held)
		<-c.release
	}
	return res
}

// An Update published while the queue's attempt for a waiter is in flight: the attempt's outcome is
// applied with the settings it was decided with, and the wake-up is not lost. A fixed window of 4
// per minute has used permits; one waiter queues (RetryAfter about a minute). A first Update (Adopt,
// no I/O) wakes the queue and the attempt's reply is held; a second Update is published while it is
// held; then the reply arrives.
//   - stale rejection: rejected under the first settings, the waiter retries at once under the
//     second ones and is admitted, instead of sleeping on the rejection's RetryAfter.
//   - admission kept: admitted under the first settings, the waiter keeps its admission although it
//     is larger than the second capacity (the server holds the permits).
//   - above the new capacity: rejected under the first settings and larger than the second
//     capacity, the waiter leaves without RetryAfter.
func testLimiterQueueUpdateDuringAttempt(t *testing.T, e *env) {
	fw := func(limit int64) ratelimit.FixedWindow {
		return ratelimit.FixedWindow{Limit: limit, Window: time.Minute}
	}
	for _, tc := range []struct {
		name          string
		used, n       int64
		first, second int64 // limits of the two updates
		allowed       bool
	}{
		{name: "stale rejection", used: 4, n: 1, first: 3, second: 5, allowed: true},
		{name: "admission kept", used: 2, n: 3, first: 5, second: 2, allowed: true},
		{name: "above the new capacity", used: 4, n: 3, first: 3, second: 2, allowed: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := newHeldClient(e.NewClient(t, nil, matrix.NoCache))
			l := e.limiter(t, hc, e.key(t), fw(4), ratelimit.WithQueue(10, ratelimit.OldestFirst))
			limExhaust(t, l, tc.used)
			w := limWaitAsync(ctx(t), l, "w", tc.n)
			limWaitQueued(t, l, tc.n)

			hc.armed.Store(true)
			require.NoError(t, l.Update(ctx(t), fw(tc.first), ratelimit.Adopt))
			select {
			case <-hc.held:
			case <-time.After(30 * time.Second):
				t.Fatal("the woken queue made no attempt")
			}
			updated := make(chan error, 1)
			go func() { updated <- l.Update(ctx(t), fw(tc.second), ratelimit.Adopt) }()
			close(hc.release)
			require.NoError(t, <-updated)

			o := limRecv(t, w)
			if tc.allowed {
				require.NoError(t, o.err)
			} else {
				require.ErrorIs(t, o.err, ratelimit.ErrExceedsCapacity)
			}
			require.Equal(t, tc.allowed, o.res.Allowed, "%+v", o.res)
			if !tc.allowed {
				require.Equal(t, ratelimit.ReasonCapacity, o.res.Reason)
				require.Zero(t, o.res.RetryAfter, "above the capacity: no retry can succeed")
			}
			require.Zero(t, l.Stats().Queued)
			// The server holds what the admissions took.
			probe, err := l.AllowN(ctx(t), 0)
			require.NoError(t, err)
			want := tc.used
			if tc.allowed {
				want += tc.n
			}
			require.Equal(t, max(tc.second-want, 0), probe.Remaining, "%+v", probe)
		})
	}
}

// A queued request rechecks the deny list before its retry: denied while waiting, it leaves the
// queue with ReasonDenyList (the deny list has no cache here, so the update is seen at once).
func testLimiterQueueDenyRecheck(t *testing.T, e *env) {
	client := e.NewClient(t, nil, matrix.NoCache)
	dl, err := denylist.New(client, e.key(t), denylist.WithCacheDuration(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = dl.Close(context.Background()) })
	key := e.key(t)
	l := e.limiter(t, client, key, ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithQueue(10, ratelimit.OldestFirst), ratelimit.WithDenyList(dl, "tenant-7"))
	limExhaust(t, l, 1)
	w := limWaitAsync(ctx(t), l, "w", 1)
	limWaitQueued(t, l, 1)
	require.NoError(t, dl.SetDenied(ctx(t), "tenant-7", true))
	// A deny-list update does not wake the queue; an Update does (Adopt: no I/O), and the retry
	// rechecks the deny list first.
	require.NoError(t, l.Update(ctx(t), ratelimit.FixedWindow{Limit: 1, Window: 2 * time.Minute}, ratelimit.Adopt))
	o := limRecv(t, w)
	require.ErrorIs(t, o.err, ratelimit.ErrDenied)
	require.False(t, o.res.Allowed)
	require.Equal(t, ratelimit.ReasonDenyList, o.res.Reason)
	require.Zero(t, o.res.RetryAfter)

	// A denied identity never enters the queue, even for a probe.
	res, err := l.WaitN(ctx(t), 0)
	require.ErrorIs(t, err, ratelimit.ErrDenied)
	require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
	require.Zero(t, l.Stats().Queued)
}

package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// TestLimiterQueueCountsPermits: WithQueue's limit counts the permits waiting (each request's n), not
// the requests. Requests of 2 and 1 permits fill a queue of 3: a request of 1 more is rejected
// (OldestFirst), a request of 2 finds room for only 1 beside a waiting 2, and NewestFirst evicts the
// 2-permit request to make room for a new one of 2 while the 1-permit request keeps its place.
func TestLimiterQueueCountsPermits(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		t.Run("oldest_first_rejects_by_permits", func(t *testing.T) { testQueueFullByPermits(t, e) })
		t.Run("newest_first_evicts_by_permits", func(t *testing.T) { testQueueEvictsByPermits(t, e) })
	})
}

// permitsQueuePolicy admits 3 permits a minute: once taken, every waiter waits about a minute, so the
// queue's content is only what the scenario put there.
var permitsQueuePolicy = ratelimit.FixedWindow{Limit: 3, Window: time.Minute}

// requireQueueFull asserts that WaitN(n) is rejected at once by the queue; ctx only bounds a wait that
// would wrongly have joined the queue.
func requireQueueFull(t *testing.T, l *ratelimit.Limiter, n int64, why string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), 3*time.Second)
	defer cancel()
	res, err := l.WaitN(c, n)
	require.ErrorIs(t, err, ratelimit.ErrQueueFull, why)
	require.False(t, res.Allowed)
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
}

// filledLimiter returns a limiter of permitsQueuePolicy with a queue of 3 permits served in order, its
// permits all taken, and the context for its waiters with its cancel (also called at t's end).
func filledLimiter(t *testing.T, e *env, order ratelimit.QueueOrder) (*ratelimit.Limiter, context.Context, context.CancelFunc) {
	t.Helper()
	l := e.limiter(t, nil, e.key(t), permitsQueuePolicy, ratelimit.WithQueue(3, order))
	limExhaust(t, l, 3)
	c, cancel := context.WithCancel(ctx(t))
	t.Cleanup(cancel)
	return l, c, cancel
}

// cancelWaiting cancels the requests still waiting (each ends with context.Canceled, counted as no
// outcome) and checks l's final statistics: the one AllowN that took the permits, and rejected
// queue rejections.
func cancelWaiting(t *testing.T, l *ratelimit.Limiter, cancel context.CancelFunc, rejected int64, waiting ...<-chan limOutcome) {
	t.Helper()
	cancel()
	for _, ch := range waiting {
		o := limRecv(t, ch)
		require.ErrorIs(t, o.err, context.Canceled, o.name)
	}
	st := l.Stats()
	require.Equal(t, int64(1), st.Granted)
	require.Equal(t, rejected, st.Rejected, "the queue's own rejections")
	require.Zero(t, st.Queued)
}

func testQueueFullByPermits(t *testing.T, e *env) {
	l, c, cancel := filledLimiter(t, e, ratelimit.OldestFirst)
	two := limWaitAsync(c, l, "two", 2)
	limWaitQueued(t, l, 2)
	requireQueueFull(t, l, 2, "one waiting request of 2 leaves room for 1 permit of the 3, not for 2")
	one := limWaitAsync(c, l, "one", 1)
	limWaitQueued(t, l, 3)
	requireQueueFull(t, l, 1, "two waiting requests of 2 and 1 permits fill a queue of 3")
	require.Equal(t, int64(3), l.Stats().Queued)
	cancelWaiting(t, l, cancel, 2, two, one)
}

func testQueueEvictsByPermits(t *testing.T, e *env) {
	l, c, cancel := filledLimiter(t, e, ratelimit.NewestFirst)
	two := limWaitAsync(c, l, "two", 2)
	limWaitQueued(t, l, 2)
	one := limWaitAsync(c, l, "one", 1)
	limWaitQueued(t, l, 3)
	newer := limWaitAsync(c, l, "newer", 2) // 3 + 2 > 3: the oldest request, of 2 permits, makes room

	select {
	case o := <-two:
		require.ErrorIs(t, o.err, ratelimit.ErrQueueFull, "the 2-permit request is evicted")
		require.False(t, o.res.Allowed)
		require.Equal(t, ratelimit.ReasonCapacity, o.res.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("the oldest request (2 permits) was not evicted for a new request of 2 in a full queue of 3")
	}
	limWaitQueued(t, l, 3) // 1 + 2
	select {
	case o := <-one:
		t.Fatalf("the 1-permit request left the queue (%+v, %v): evicting the 2-permit one made room", o.res, o.err)
	default:
	}
	cancelWaiting(t, l, cancel, 1, one, newer)
}

package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// queueOrderDenyCacheCloseStatsScenarios returns the scenarios of this file, against ratelimit's
// public API only: the default queue order, the deny cache's eviction order, Close and Stats.
func queueOrderDenyCacheCloseStatsScenarios() []scenario {
	return []scenario{
		{Name: "limiter_queue_order_zero_value_is_oldest_first", Run: testQueueDefaultOrder},
		{Name: "deny_cache_evicts_expired_before_lru", Run: testDenyCacheExpiredFirst},
		{Name: "limiter_close_keeps_callers_client", Run: testCloseKeepsClient},
		{Name: "limiter_stats_describe_last_reply_across_update", Run: testStatsAcrossUpdate},
	}
}

// testQueueDefaultOrder: the zero QueueOrder (what a configuration that leaves the order unset
// passes) serves the oldest waiting request first: a, b, c queued in that order are admitted in that
// order, none rejected.
func testQueueDefaultOrder(t *testing.T, e *env) {
	var unset ratelimit.QueueOrder
	require.Equal(t, ratelimit.OldestFirst, unset)
	l := e.limiter(t, nil, e.key(t), queueGCRA, ratelimit.WithQueue(10, unset))
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
		require.True(t, o.res.At.After(prev), "%s admitted at %v, not after the previous one (%v): not oldest first", o.name, o.res.At, prev)
		prev = o.res.At
	}
	require.Zero(t, l.Stats().Rejected)
}

// testDenyCacheExpiredFirst: a full cache makes room by removing expired entries before the
// least recently used one, here with an expired entry that is the most recently used: A is read, then
// B, then A again (a hit: A becomes the most recently used); once A's fixed expiry passed, reading C
// removes A, not B, so B is still answered from the cache without a server read.
func testDenyCacheExpiredFirst(t *testing.T, e *env) {
	const d = 3 * time.Second
	key := e.key(t)
	dl := denyList(t, e.NewClient(t, nil, matrix.NoCache), key, denylist.WithCacheCapacity(2), denylist.WithCacheDuration(d))
	start := time.Now()
	denyIs(t, dl, "A", false)
	time.Sleep(d / 2)
	denyIs(t, dl, "B", false) // expires d/2 after A
	hits := dl.Stats().Hits
	denyIs(t, dl, "A", false)
	require.Equal(t, hits+1, dl.Stats().Hits, "A answered from the cache: now the most recently used")
	time.Sleep(time.Until(start.Add(d + 100*time.Millisecond))) // A expired; B has about d/2 left
	reads := dl.Stats().ServerReads
	denyIs(t, dl, "C", false)
	require.Equal(t, reads+1, dl.Stats().ServerReads, "C read from the server")
	hits = dl.Stats().Hits
	denyIs(t, dl, "B", false)
	st := dl.Stats()
	require.Equal(t, hits+1, st.Hits, "B is still cached: the full cache removed expired A, not LRU B (%+v)", st)
	require.Equal(t, reads+1, st.ServerReads)
	require.Equal(t, 2, st.Cached)
}

// testCloseKeepsClient: Limiter.Close, Keyed.Close and denylist.List.Close never close the caller's
// client: it answers afterwards, and a new limiter over it decides.
func testCloseKeepsClient(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	key := e.key(t)
	dl, err := denylist.New(c, key+":deny")
	require.NoError(t, err)
	l, err := ratelimit.New(c, key+":limiter", queueGCRA, ratelimit.WithDenyList(dl, "id"))
	require.NoError(t, err)
	_, err = l.Allow(ctx(t))
	require.NoError(t, err)
	k, err := ratelimit.NewKeyed(c, queueGCRA, ratelimit.WithKeyPrefix(key+":keyed:"))
	require.NoError(t, err)
	_, err = k.Allow(ctx(t), "k")
	require.NoError(t, err)
	for name, closeFn := range map[string]func(context.Context) error{"Limiter": l.Close, "Keyed": k.Close, "DenyList": dl.Close} {
		require.NoError(t, closeFn(ctx(t)), name)
		require.NoError(t, c.Do(ctx(t), c.B().Ping().Build()).Error(), "the client must still work after %s.Close", name)
	}
	again := e.limiter(t, c, fmt.Sprint(key, ":again"), queueGCRA)
	res, err := again.Allow(ctx(t))
	require.NoError(t, err)
	require.True(t, res.Allowed)
}

// testStatsAcrossUpdate: Stats().Available is the Remaining of the latest server reply, and an
// Update (Migrate or Adopt) does not change it: it still describes that reply until the next decision.
func testStatsAcrossUpdate(t *testing.T, e *env) {
	c := ctx(t)
	l := e.limiter(t, nil, e.key(t), ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	require.EqualValues(t, -1, l.Stats().Available, "before the first reply")
	var res ratelimit.Result
	var err error
	for range 3 {
		res, err = l.Allow(c)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	require.EqualValues(t, 7, res.Remaining)
	require.EqualValues(t, 7, l.Stats().Available)
	require.NoError(t, l.Update(c, ratelimit.FixedWindow{Limit: 20, Window: time.Minute}, ratelimit.Migrate))
	require.EqualValues(t, 7, l.Stats().Available, "a migration does not change the statistics of the last reply")
	require.NoError(t, l.Update(c, ratelimit.FixedWindow{Limit: 30, Window: time.Minute}, ratelimit.Adopt))
	require.EqualValues(t, 7, l.Stats().Available, "nor does an adoption")
	st := l.Stats()
	require.Equal(t, int64(3), st.Granted)
	require.Zero(t, st.Rejected)
	res, err = l.Allow(c)
	require.NoError(t, err)
	require.Equal(t, res.Remaining, l.Stats().Available, "the next reply replaces it")
}

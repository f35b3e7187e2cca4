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

// limiterKeyedScenarios returns the scenarios of this file.
func limiterKeyedScenarios() []scenario {
	return []scenario{
		{Name: "limiter_keyed_many_keys_no_state", Run: testLimiterKeyedManyKeys},
		{Name: "limiter_keyed_idle_eviction", Run: testLimiterKeyedIdle},
		{Name: "limiter_keyed_max_keys", Run: testLimiterKeyedMaxKeys},
		{Name: "limiter_keyed_deny_list", Run: testLimiterKeyedDenyList},
	}
}

func limKeyed(t *testing.T, e *env, p ratelimit.Policy, opts ...ratelimit.KeyedOption) *ratelimit.Keyed {
	t.Helper()
	k, err := ratelimit.NewKeyed(e.NewClient(t, nil, matrix.NoCache), p, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return k
}

// AllowN over 500 keys keeps no local state: each key is its own limit in the server (under the
// prefix), decided independently, and Keys stays 0.
func testLimiterKeyedManyKeys(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	k := limKeyed(t, e, ratelimit.FixedWindow{Limit: 2, Window: time.Minute},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithQueue(4, ratelimit.OldestFirst))
	const keys = 500
	for i := range keys {
		key := fmt.Sprintf("tenant-%d", i)
		for j, want := range []bool{true, true, false} {
			res, err := k.AllowN(ctx(t), key, 1)
			require.NoError(t, err)
			require.Equal(t, want, res.Allowed, "key %s call %d", key, j)
		}
	}
	require.Zero(t, k.KeyCount(), "AllowN creates no local state")
	require.True(t, e.exists(t, prefix+"tenant-0"))
	require.True(t, e.exists(t, prefix+fmt.Sprintf("tenant-%d", keys-1)))
	require.Equal(t, ratelimit.Stats{Available: -1}, k.KeyStats("tenant-0"))
	_, err := k.AllowN(ctx(t), "", 1)
	require.Error(t, err)
	_, err = k.AllowN(ctx(t), "x", -1)
	require.ErrorIs(t, err, ratelimit.ErrNegativePermits)
}

// WaitN creates a key's local state on demand (with Stats); it is dropped after the idle timeout
// once nothing waits, and a key with a waiter is never dropped.
func testLimiterKeyedIdle(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	k := limKeyed(t, e, ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithQueue(4, ratelimit.OldestFirst),
		ratelimit.WithIdleTimeout(50*time.Millisecond))
	res, err := k.WaitN(ctx(t), "idle", 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	st := k.KeyStats("idle")
	require.Equal(t, int64(1), st.Granted)
	require.Zero(t, st.Available)

	// "busy" waits (its window is exhausted) well past the idle timeout; "idle" is dropped meanwhile.
	res, err = k.AllowN(ctx(t), "busy", 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := k.WaitN(cctx, "busy", 1)
		done <- err
	}()
	require.Eventually(t, func() bool { return k.KeyStats("busy").Queued == 1 }, 20*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return k.KeyCount() == 1 }, 20*time.Second, 5*time.Millisecond,
		"the idle key's state is dropped")
	require.Equal(t, ratelimit.Stats{Available: -1}, k.KeyStats("idle"))
	require.Equal(t, int64(1), k.KeyStats("busy").Queued, "a key with a waiter is kept")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return k.KeyCount() == 0 }, 20*time.Second, 5*time.Millisecond)
}

// WithMaxKeys bounds the keys with local state: a new key evicts the least recently used idle one,
// and when every key with state has a waiter, a new key is served without state (decided once).
func testLimiterKeyedMaxKeys(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	k := limKeyed(t, e, ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithQueue(4, ratelimit.OldestFirst),
		ratelimit.WithMaxKeys(2))
	for _, key := range []string{"a", "b", "c"} {
		res, err := k.WaitN(ctx(t), key, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		require.LessOrEqual(t, k.KeyCount(), 2)
	}
	require.Equal(t, 2, k.KeyCount())
	require.Equal(t, ratelimit.Stats{Available: -1}, k.KeyStats("a"), "the least recently used key was evicted")
	require.Equal(t, int64(1), k.KeyStats("c").Granted)

	// b and c both get a waiter; then d finds no idle key to evict.
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	done := make(chan error, 2)
	for _, key := range []string{"b", "c"} {
		go func() {
			_, err := k.WaitN(cctx, key, 1)
			done <- err
		}()
		require.Eventually(t, func() bool { return k.KeyStats(key).Queued == 1 }, 20*time.Second, time.Millisecond)
	}
	res, err := k.WaitN(ctx(t), "d", 1)
	require.NoError(t, err)
	require.True(t, res.Allowed, "served without local state")
	// No local state: it waits like a Keyed without a queue (sleeping RetryAfter) until ctx ends.
	dctx, dcancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	res, err = k.WaitN(dctx, "d", 1)
	dcancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "no queue without local state: waited without one")
	require.False(t, res.Allowed)
	require.Positive(t, res.RetryAfter)
	require.Equal(t, 2, k.KeyCount())
	require.Equal(t, ratelimit.Stats{Available: -1}, k.KeyStats("d"))

	cancel()
	for range 2 {
		require.ErrorIs(t, <-done, context.Canceled)
	}
}

// WithKeyedDenyList maps each key to its identity: a denied tenant is rejected with ReasonDenyList by
// AllowN and WaitN without its capacity key being created; other tenants are unaffected.
func testLimiterKeyedDenyList(t *testing.T, e *env) {
	client := e.NewClient(t, nil, matrix.NoCache)
	dl, err := denylist.New(client, e.key(t), denylist.WithCacheDuration(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = dl.Close(context.Background()) })
	prefix := e.key(t) + ":"
	k := limKeyed(t, e, ratelimit.FixedWindow{Limit: 5, Window: time.Minute},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithQueue(4, ratelimit.OldestFirst),
		ratelimit.WithKeyedDenyList(dl, func(key string) string { return "tenant:" + key }))
	require.NoError(t, dl.SetDenied(ctx(t), "tenant:evil", true))

	for i, call := range []func(context.Context, string, int64) (ratelimit.Result, error){k.AllowN, k.WaitN} {
		res, err := call(ctx(t), "evil", 1)
		if i == 0 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ratelimit.ErrDenied)
		}
		require.False(t, res.Allowed)
		require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
		res, err = call(ctx(t), "good", 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	require.False(t, e.exists(t, prefix+"evil"), "a denied key touches no capacity")
	require.True(t, e.exists(t, prefix+"good"))
	require.Equal(t, int64(1), k.KeyStats("evil").Rejected)
}

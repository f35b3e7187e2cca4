package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/ratelimit"
)

// limiterKeyedWaitStoredScenarios returns the scenarios of this file.
func limiterKeyedWaitStoredScenarios() []scenario {
	return []scenario{
		{Name: "limiter_keyed_wait_stored_capacity", Run: testKeyedWaitStoredCapacity},
		{Name: "limiter_keyed_wait_stored_capacity_queued", Run: testKeyedWaitStoredCapacityQueued},
	}
}

// keyedStoredCapacityCases: a Keyed at version 0 with capacity 5 and the settings a Keyed at version
// 1 stores with capacity 3, per algorithm. The stored settings' rejections of 5 permits carry a
// RetryAfter (GCRA, token bucket: seconds; fixed window and the composite: the window's end) or none
// (sliding window).
var keyedStoredCapacityCases = []struct {
	name     string
	old, new ratelimit.Policy
}{
	{"gcra", ratelimit.GCRA{Burst: 5, EmissionInterval: time.Second}, ratelimit.GCRA{Burst: 3, EmissionInterval: time.Second}},
	{"fixed_window", ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, ratelimit.FixedWindow{Limit: 3, Window: time.Minute}},
	{"sliding_window", ratelimit.SlidingWindow{Limit: 5, Window: time.Minute}, ratelimit.SlidingWindow{Limit: 3, Window: time.Minute}},
	{"token_bucket", ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second}, ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: time.Second}},
	{"composite", ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, ratelimit.SlidingWindow{Limit: 10, Window: time.Minute},
	}}, ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 3, Window: time.Minute}, ratelimit.SlidingWindow{Limit: 10, Window: time.Minute},
	}}},
}

// testKeyedWaitStoredCapacity: an old Keyed's WaitN of 5 permits on a key a newer Keyed (higher
// version) stored with capacity 3 can never be admitted: it fails with ErrExceedsCapacity on the
// first decision (well before a generous deadline), never ErrQueueFull (no queue, or a queue of room
// 10, or of room 2 below n), consumes nothing, and counts once as a capacity rejection.
func testKeyedWaitStoredCapacity(t *testing.T, e *env) {
	queues := map[string][]ratelimit.KeyedOption{
		"no_queue":      nil,
		"queue":         {ratelimit.WithQueue(10, ratelimit.OldestFirst)},
		"queue_below_n": {ratelimit.WithQueue(2, ratelimit.NewestFirst)},
	}
	for _, tc := range keyedStoredCapacityCases {
		for qname, qopts := range queues {
			t.Run(tc.name+"/"+qname, func(t *testing.T) {
				prefix := e.key(t) + ":"
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
				opts := append([]ratelimit.KeyedOption{ratelimit.WithKeyPrefix(prefix), ratelimit.WithMeterProvider(mp)}, qopts...)
				oldK := limKeyed(t, e, tc.old, opts...)
				newK := limKeyed(t, e, tc.new, ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1))
				res, err := newK.AllowN(ctx(t), "k", 1)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				require.Equal(t, int64(3), res.Limit)
				before := e.dump(t, prefix+"k")
				require.Equal(t, "1", limStoredVersion(before), "stored by the newer Keyed")
				res, err = oldK.AllowN(ctx(t), "k", 5)
				require.NoError(t, err)
				require.False(t, res.Allowed)
				require.Equal(t, int64(3), res.Limit)
				require.Zero(t, res.RetryAfter, "AllowN: no retry can admit 5 permits")

				wctx, cancel := context.WithTimeout(ctx(t), 10*time.Second)
				defer cancel()
				start := time.Now()
				res, err = oldK.WaitN(wctx, "k", 5)
				elapsed := time.Since(start)
				require.ErrorIs(t, err, ratelimit.ErrExceedsCapacity)
				require.NotErrorIs(t, err, ratelimit.ErrQueueFull)
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				require.Less(t, elapsed, 5*time.Second, "waited for a request the stored settings can never admit")
				require.False(t, res.Allowed)
				require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
				require.Equal(t, int64(3), res.Limit, "the capacity of the stored settings")
				require.Zero(t, res.RetryAfter)
				require.Equal(t, before, e.dump(t, prefix+"k"), "nothing consumed, the newer settings stay stored")
				require.Equal(t, map[string]int64{"blocked:capacity": 2}, limCounts(t, reader), "AllowN and WaitN: one rejection each")

				// A request that fits the stored capacity is still admitted.
				res, err = oldK.WaitN(wctx, "k", 2)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				require.Equal(t, int64(3), res.Limit)
			})
		}
	}
}

// testKeyedWaitStoredCapacityQueued: a request queued behind another waiter leaves the queue with
// ErrExceedsCapacity on its first attempt when the stored settings' capacity is below n, instead of
// sleeping on its RetryAfter; the waiter ahead is admitted.
func testKeyedWaitStoredCapacityQueued(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	oldK := limKeyed(t, e, ratelimit.GCRA{Burst: 5, EmissionInterval: 500 * time.Millisecond},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithQueue(10, ratelimit.OldestFirst))
	newK := limKeyed(t, e, ratelimit.GCRA{Burst: 3, EmissionInterval: 500 * time.Millisecond},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1))
	res, err := newK.AllowN(ctx(t), "k", 3)
	require.NoError(t, err)
	require.True(t, res.Allowed)

	wctx, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	type outcome struct {
		res ratelimit.Result
		err error
	}
	ahead := make(chan outcome, 1)
	go func() {
		r, err := oldK.WaitN(wctx, "k", 1)
		ahead <- outcome{r, err}
	}()
	require.Eventually(t, func() bool { return oldK.KeyStats("k").Queued == 1 }, 5*time.Second, 2*time.Millisecond)
	start := time.Now()
	res, err = oldK.WaitN(wctx, "k", 5)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, ratelimit.ErrExceedsCapacity)
	require.NotErrorIs(t, err, ratelimit.ErrQueueFull)
	require.Less(t, elapsed, 5*time.Second)
	require.Equal(t, int64(3), res.Limit)
	o := <-ahead
	require.NoError(t, o.err)
	require.True(t, o.res.Allowed)
	st := oldK.KeyStats("k")
	require.Equal(t, int64(1), st.Granted)
	require.Equal(t, int64(1), st.Rejected)
	require.Zero(t, st.Queued)
}

// limStoredVersion returns the policy version of a keyed key's raw state (e.dump): the V field of a
// hash, the version of a keyed GCRA value ("u<TAT>|version|g<burst>/<T>").
func limStoredVersion(raw map[string]string) string {
	if v, ok := raw["V"]; ok {
		return v
	}
	s := raw[""]
	start := -1
	for i := 0; i < len(s); i++ {
		if s[i] != '|' {
			continue
		}
		if start < 0 {
			start = i + 1
			continue
		}
		return s[start:i]
	}
	return ""
}

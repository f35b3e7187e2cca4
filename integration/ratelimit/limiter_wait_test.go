package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// limiterWaitScenarios returns the scenarios of this file.
func limiterWaitScenarios() []scenario {
	return []scenario{
		{Name: "limiter_wait_without_queue", Run: limWaitWithoutQueue},
	}
}

// limWaitWithoutQueue: without WithQueue, Wait sleeps the server's RetryAfter and decides again
// (two scripts for one rejection then one admission: no polling); a Wait that returns without
// admission always returns an error (above the capacity at once with no script, a deadline before
// the admission time at once, a cancellation while sleeping, a denied identity), for Limiter and
// Keyed alike.
func limWaitWithoutQueue(t *testing.T, e *env) {
	p := ratelimit.GCRA{Burst: 1, EmissionInterval: 300 * time.Millisecond}
	type waiter func(ctx context.Context, n int64) (ratelimit.Result, error)
	kd, err := ratelimit.NewKeyed(e.NewClient(t, nil, matrix.NoCache), p)
	require.NoError(t, err)
	defer func() { require.NoError(t, kd.Close(ctx(t))) }()
	cases := map[string]func(t *testing.T) (allow, wait waiter){
		"limiter": func(t *testing.T) (waiter, waiter) {
			l := e.limiter(t, nil, e.key(t), p)
			return l.AllowN, l.WaitN
		},
		"keyed": func(t *testing.T) (waiter, waiter) {
			key := e.key(t)
			return func(c context.Context, n int64) (ratelimit.Result, error) { return kd.AllowN(c, key, n) },
				func(c context.Context, n int64) (ratelimit.Result, error) { return kd.WaitN(c, key, n) }
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			allow, wait := mk(t)
			res, err := allow(ctx(t), 1)
			require.NoError(t, err)
			require.True(t, res.Allowed)

			before := limScripts(t, e)
			start := time.Now()
			res, err = wait(ctx(t), 1)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "admitted before the emission interval")
			require.Equal(t, int64(2), limScripts(t, e)-before, "one rejection, one admission: no polling")

			before = limScripts(t, e)
			res, err = wait(ctx(t), 2)
			require.ErrorIs(t, err, ratelimit.ErrExceedsCapacity)
			require.False(t, res.Allowed)
			require.Equal(t, before, limScripts(t, e), "above the capacity: no script")

			// The admission is about 300ms away: a 200ms deadline fails at once rather than at the
			// deadline.
			dctx, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
			_, err = wait(dctx, 1)
			early := dctx.Err() == nil
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.True(t, early, "slept towards a deadline it cannot meet")

			cctx, cancel := context.WithCancel(ctx(t))
			go func() { time.Sleep(50 * time.Millisecond); cancel() }()
			_, err = wait(cctx, 1)
			require.ErrorIs(t, err, context.Canceled)
		})
	}
	t.Run("denied", func(t *testing.T) {
		dl := denyList(t, e.NewClient(t, nil, matrix.NoCache), e.key(t))
		denySet(t, dl, "x", true)
		l := e.limiter(t, nil, e.key(t), p, ratelimit.WithDenyList(dl, "x"))
		res, err := l.Wait(ctx(t))
		require.ErrorIs(t, err, ratelimit.ErrDenied)
		require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
		ql := e.limiter(t, nil, e.key(t), p, ratelimit.WithDenyList(dl, "x"), ratelimit.WithQueue(5, ratelimit.OldestFirst))
		_, err = ql.Wait(ctx(t))
		require.True(t, errors.Is(err, ratelimit.ErrDenied), "with a queue: %v", err)
		require.Equal(t, ratelimit.Stats{Rejected: 1, Available: -1}, ql.Stats())
	})
}

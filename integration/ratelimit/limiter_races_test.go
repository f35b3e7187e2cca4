package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// limiterRacesScenarios returns the scenarios of this file.
func limiterRacesScenarios() []scenario {
	return []scenario{
		{Name: "limiter_keyed_eviction_races", Run: limKeyedEvictionRaces},
		{Name: "limiter_update_close_races", Run: limUpdateCloseRaces},
	}
}

// WaitN and AllowN on a Keyed whose local state is evicted all the time (MaxKeys 2, idle
// timeout 1ms) never fail, never hold more than MaxKeys entries, and every call counts once.
func limKeyedEvictionRaces(t *testing.T, e *env) {
	const workers, ops, keys = 8, 40, 5
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	k, err := ratelimit.NewKeyed(e.NewClient(t, nil, matrix.NoCache), ratelimit.FixedWindow{Limit: 1 << 20, Window: time.Minute},
		ratelimit.WithKeyPrefix(e.key(t)+":"), ratelimit.WithQueue(4, ratelimit.OldestFirst),
		ratelimit.WithMaxKeys(2), ratelimit.WithIdleTimeout(time.Millisecond), ratelimit.WithMeterProvider(mp))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var granted, maxKeys atomic.Int64
	errs := make(chan error, workers*ops)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ops {
				key := fmt.Sprintf("k%d", (w+i)%keys)
				var res ratelimit.Result
				var err error
				if i%3 == 0 {
					res, err = k.AllowN(ctx(t), key, 1)
				} else {
					res, err = k.WaitN(ctx(t), key, 1)
				}
				if err != nil {
					errs <- err
					continue
				}
				if res.Allowed {
					granted.Add(1)
				}
				if n := int64(k.KeyCount()); n > maxKeys.Load() {
					maxKeys.Store(n)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(workers*ops), granted.Load())
	require.LessOrEqual(t, maxKeys.Load(), int64(2))
	require.Equal(t, int64(workers*ops), limCounts(t, reader)["allowed"], "each call counted once")
	require.NoError(t, k.Close(context.Background()))
	_, err = k.WaitN(ctx(t), "k0", 1)
	require.ErrorIs(t, err, ratelimit.ErrClosed)
}

// Updates (Migrate and Adopt) racing queued WaitN calls and then Close: nothing hangs, every
// call ends with a Result, ErrClosed or its context's error, and nothing is left queued.
func limUpdateCloseRaces(t *testing.T, e *env) {
	key := e.key(t)
	l, err := ratelimit.New(e.NewClient(t, nil, matrix.NoCache), key, ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: 20 * time.Millisecond},
		ratelimit.WithQueue(6, ratelimit.NewestFirst))
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var outcomes, closedErrs atomic.Int64
	bad := make(chan error, 64)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
				_, err := l.WaitN(c, 1)
				cancel()
				switch {
				case err == nil:
					outcomes.Add(1)
				case errors.Is(err, ratelimit.ErrClosed):
					closedErrs.Add(1)
					return
				case errors.Is(err, context.DeadlineExceeded):
				default:
					select {
					case bad <- err:
					default:
					}
				}
			}
		}()
	}
	policies := []ratelimit.Policy{
		ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 15 * time.Millisecond},
		ratelimit.TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: 25 * time.Millisecond},
		ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: 20 * time.Millisecond},
	}
	for i := range 30 {
		mode := ratelimit.Migrate
		if i%4 == 3 {
			mode = ratelimit.Adopt
		}
		require.NoError(t, l.Update(ctx(t), policies[i%len(policies)], mode))
		time.Sleep(3 * time.Millisecond) // lets decisions interleave (coverage only, asserted on nothing)
	}
	done := make(chan struct{})
	go func() {
		_ = l.Close(context.Background())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	close(stop)
	wg.Wait()
	close(bad)
	for err := range bad {
		require.NoError(t, err)
	}
	require.Positive(t, outcomes.Load())
	require.Zero(t, l.Stats().Queued)
	require.ErrorIs(t, l.Update(ctx(t), policies[0], ratelimit.Adopt), ratelimit.ErrClosed)
	t.Logf("%d outcomes, %d workers ended by Close", outcomes.Load(), closedErrs.Load())
}

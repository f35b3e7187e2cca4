package ratelimit_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// limiterUpdateScenarios returns the scenarios of this file.
func limiterUpdateScenarios() []scenario {
	return []scenario{
		{Name: "limiter_update_migrate_then_adopt", Run: testLimiterUpdateMigrateAdopt},
		{Name: "limiter_update_noop_and_invalid", Run: testLimiterUpdateNoopInvalid},
		{Name: "limiter_update_config_mismatch_keeps_settings", Run: testLimiterUpdateMismatch},
		{Name: "limiter_update_concurrent_with_decisions", Run: testLimiterUpdateConcurrent},
		{Name: "limiter_update_zz_failed_migration_closes", Run: testLimiterUpdateFailedCloses, StandaloneOnly: true},
		{Name: "limiter_update_zz_outlives_ctx", Run: testLimiterUpdateOutlivesCtx, StandaloneOnly: true},
	}
}

// The update protocol for two processes sharing a key: one migrates (one script), the other adopts
// (no script at all), and both then decide under the new settings over the same stored usage.
func testLimiterUpdateMigrateAdopt(t *testing.T, e *env) {
	key := e.key(t)
	old := ratelimit.FixedWindow{Limit: 3, Window: time.Minute}
	l1 := e.limiter(t, nil, key, old)
	l2 := e.limiter(t, nil, key, old)
	limExhaust(t, l1, 2)
	stored := e.dump(t, key)
	require.NotEmpty(t, stored)

	next := ratelimit.FixedWindow{Limit: 5, Window: time.Minute}
	before := limScripts(t, e)
	require.NoError(t, l1.Update(ctx(t), next, ratelimit.Migrate))
	require.Equal(t, before+1, limScripts(t, e), "Migrate runs one script")
	before = limScripts(t, e)
	require.NoError(t, l2.Update(ctx(t), next, ratelimit.Adopt))
	require.Equal(t, before, limScripts(t, e), "Adopt does no I/O")
	require.Equal(t, next, l1.Policy())
	require.Equal(t, next, l2.Policy())

	res, err := l2.AllowN(ctx(t), 3) // 2 used + 3 = the new limit
	require.NoError(t, err)
	require.True(t, res.Allowed, "%+v", res)
	require.Equal(t, int64(5), res.Limit)
	require.Zero(t, res.Remaining)
	res, err = l1.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Positive(t, res.RetryAfter)
}

// An identical update (after rounding) is a no-op without I/O. Invalid settings and a change of
// algorithm are rejected before any I/O and keep the old settings.
func testLimiterUpdateNoopInvalid(t *testing.T, e *env) {
	key := e.key(t)
	pol := ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second}
	l := e.limiter(t, nil, key, pol)
	limExhaust(t, l, 4)
	stored := e.dump(t, key)

	before := limScripts(t, e)
	require.NoError(t, l.Update(ctx(t), pol, ratelimit.Migrate))
	require.NoError(t, l.Update(ctx(t), ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 2,
		Period: time.Second - 300*time.Nanosecond}, ratelimit.Migrate), "rounds up to the same settings")
	require.ErrorIs(t, l.Update(ctx(t), ratelimit.TokenBucket{Limit: 0, TokensPerPeriod: 2, Period: time.Second},
		ratelimit.Migrate), ratelimit.ErrInvalidPolicy)
	require.ErrorIs(t, l.Update(ctx(t), ratelimit.FixedWindow{Limit: 10, Window: time.Second},
		ratelimit.Migrate), ratelimit.ErrInvalidUpdate)
	require.ErrorIs(t, l.Update(ctx(t), ratelimit.FixedWindow{Limit: 10, Window: time.Second},
		ratelimit.Adopt), ratelimit.ErrInvalidUpdate)
	// The zero mode is not Migrate: an update that names no mode is rejected, nothing is migrated.
	err := l.Update(ctx(t), ratelimit.TokenBucket{Limit: 20, TokensPerPeriod: 2, Period: time.Second}, ratelimit.UpdateMode(0))
	require.ErrorIs(t, err, ratelimit.ErrInvalidUpdate)
	require.ErrorIs(t, err, ratelimit.ErrInvalidConfig)
	require.Equal(t, before, limScripts(t, e), "no script for no-op or rejected updates")
	require.Equal(t, pol, l.Policy())
	require.Equal(t, stored, e.dump(t, key))

	res, err := l.AllowN(ctx(t), 6) // still the old settings: 10 - 4
	require.NoError(t, err)
	require.True(t, res.Allowed, "%+v", res)
	require.Equal(t, int64(10), res.Limit)
}

// A composite key written by another limiter with other settings: Migrate is rejected by the script
// with ErrConfigMismatch before writing, and the limiter keeps its old settings, stays open and keeps
// its queue.
func testLimiterUpdateMismatch(t *testing.T, e *env) {
	key := e.key(t)
	theirs := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 10, Window: time.Minute},
		ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
	}}
	ours := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 20, Window: time.Minute},
		ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
	}}
	other := e.limiter(t, nil, key, theirs)
	limExhaust(t, other, 2)
	stored := e.dump(t, key)

	l := e.limiter(t, nil, key, ours, ratelimit.WithQueue(5, ratelimit.OldestFirst))
	next := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 30, Window: time.Minute},
		ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
	}}
	require.ErrorIs(t, l.Update(ctx(t), next, ratelimit.Migrate), ratelimit.ErrConfigMismatch)
	require.Equal(t, ours, l.Policy(), "old settings kept")
	require.Equal(t, stored, e.dump(t, key), "nothing written")
	// Still open: decisions report the mismatch (not ErrClosed), and a second attempt is rejected the
	// same way.
	_, err := l.AllowN(ctx(t), 1)
	require.ErrorIs(t, err, ratelimit.ErrConfigMismatch)
	require.ErrorIs(t, l.Update(ctx(t), next, ratelimit.Migrate), ratelimit.ErrConfigMismatch)
	require.Equal(t, stored, e.dump(t, key))
}

// Updates race decisions on the same limiter: every decision uses one consistent setting, so the
// Limit of every Result is either the old or the new capacity, the admissions never exceed the
// largest capacity that applied (the window's count is kept by every migration), and the final
// settings are the last update's. Each update waits until decisions have run since the previous one.
func testLimiterUpdateConcurrent(t *testing.T, e *env) {
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 100, Window: time.Minute})
	c := ctx(t)
	done := make(chan struct{})
	var decisions, admitted atomic.Int64
	var bad atomic.Int64 // a Limit that is neither 100 nor 110
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := l.Allow(c)
				if err != nil {
					t.Error(err)
					return
				}
				decisions.Add(1)
				if res.Allowed {
					admitted.Add(1)
				}
				if res.Limit != 100 && res.Limit != 110 {
					bad.Add(1)
				}
			}
		})
	}
	const updates = 20
	for i := range updates {
		from := decisions.Load()
		for decisions.Load() < from+20 {
			runtime.Gosched()
		}
		limit := int64(100 + 10*(i%2))
		require.NoError(t, l.Update(c, ratelimit.FixedWindow{Limit: limit, Window: time.Minute}, ratelimit.Migrate))
	}
	close(done)
	wg.Wait()
	require.Zero(t, bad.Load(), "a decision saw a capacity that was never set")
	require.LessOrEqual(t, admitted.Load(), int64(110))
	require.Equal(t, int64(110), admitted.Load(), "the window filled to the largest capacity")
	require.Equal(t, ratelimit.FixedWindow{Limit: 110, Window: time.Minute}, l.Policy(), "the last update (i = 19)")
	t.Logf("%d decisions, %d admitted across %d updates", decisions.Load(), admitted.Load(), updates)
}

// A migration whose reply never arrives within the update timeout (the server is paused) closes the
// limiter: the server may already hold the migrated state. Its queued request fails with ErrClosed,
// and later calls too.
func testLimiterUpdateFailedCloses(t *testing.T, e *env) {
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.GCRA{Burst: 1, EmissionInterval: time.Minute},
		ratelimit.WithQueue(1, ratelimit.OldestFirst), ratelimit.WithUpdateTimeout(300*time.Millisecond))
	limExhaust(t, l, 1)
	w := limWaitAsync(ctx(t), l, "w", 1)
	limWaitQueued(t, l, 1)

	e.Srv.MustPause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			e.Srv.MustResume(t)
		}
	})
	err := l.Update(ctx(t), ratelimit.GCRA{Burst: 2, EmissionInterval: time.Minute}, ratelimit.Migrate)
	e.Srv.MustResume(t)
	resumed = true
	require.Error(t, err)
	t.Logf("failed migration: %v", err)
	require.ErrorIs(t, err, ratelimit.ErrUncertain, "the script was sent, its reply never read")

	o := limRecv(t, w)
	require.ErrorIs(t, o.err, ratelimit.ErrClosed)
	_, err = l.AllowN(ctx(t), 0)
	require.ErrorIs(t, err, ratelimit.ErrClosed)
	require.ErrorIs(t, l.Update(ctx(t), ratelimit.GCRA{Burst: 3, EmissionInterval: time.Minute}, ratelimit.Adopt),
		ratelimit.ErrClosed)
	require.Equal(t, ratelimit.GCRA{Burst: 1, EmissionInterval: time.Minute}, l.Policy(), "never published")
}

// Once the migration script is sent, Update observes its reply even when the caller's ctx ends first
// (so that the limiter never guesses which settings the server holds): the server is paused, the ctx deadline passes, the server resumes, and the update
// succeeds with the stored state migrated and the new settings published.
func testLimiterUpdateOutlivesCtx(t *testing.T, e *env) {
	key := e.key(t)
	// One connection (matrix.OneConn): the migration must be in flight when the server pauses, not
	// waiting to dial.
	l := e.limiter(t, e.NewClient(t, nil, matrix.NoCache, matrix.OneConn), key, ratelimit.FixedWindow{Limit: 5, Window: time.Minute})
	res, err := l.AllowN(ctx(t), 3)
	require.NoError(t, err)
	require.True(t, res.Allowed)

	e.Srv.MustPause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			e.Srv.MustResume(t)
		}
	})
	uctx, cancel := context.WithTimeout(ctx(t), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- l.Update(uctx, ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, ratelimit.Migrate)
	}()
	<-uctx.Done() // the update's ctx has ended while the server cannot answer
	e.Srv.MustResume(t)
	resumed = true
	require.NoError(t, <-done, "the submitted migration's reply is observed after ctx ended")
	require.Equal(t, ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, l.Policy())
	res, err = l.AllowN(ctx(t), 7)
	require.NoError(t, err)
	require.True(t, res.Allowed, "the new capacity applies to the stored count (3 + 7 = 10)")
	require.EqualValues(t, 0, res.Remaining)
}

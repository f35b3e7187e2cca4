package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// queueWakeupsMigrationSegmentsScenarios returns the scenarios of this file, against ratelimit's
// public API: what wakes a queued request, and what a rejected migration or a narrower segment keeps.
func queueWakeupsMigrationSegmentsScenarios() []scenario {
	return []scenario{
		{Name: "limiter_queue_deny_list_update_does_not_wake", Run: testDenyUpdateNoWake},
		{Name: "limiter_update_rejected_migration_keeps_queue", Run: testRejectedMigrationKeepsQueue},
		{Name: "limiter_update_segment_shrink_keeps_old_segment_delay", Run: testSegmentShrink},
	}
}

// noOutcome asserts that ch delivers nothing for d: the waiting request is still waiting.
func noOutcome(t *testing.T, ch <-chan limOutcome, d time.Duration, msg string) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("%s: the waiting request ended: %+v, %v", msg, o.res, o.err)
	case <-time.After(d):
	}
}

// testDenyUpdateNoWake: a deny-list update does not wake queued requests. A request queued behind
// an exhausted fixed window (RetryAfter about a minute) stays queued, with no decision script sent,
// when its identity is denied; only its next retry (here woken by an Update) rechecks the deny list.
func testDenyUpdateNoWake(t *testing.T, e *env) {
	client := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, client, e.key(t), denylist.WithCacheDuration(0))
	l := e.limiter(t, client, e.key(t), ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithQueue(10, ratelimit.OldestFirst), ratelimit.WithDenyList(dl, "tenant-9"))
	limExhaust(t, l, 1)
	w := limWaitAsync(ctx(t), l, "w", 1)
	limWaitQueued(t, l, 1)

	require.NoError(t, dl.SetDenied(ctx(t), "someone-else", false)) // loads the write script
	before := limScripts(t, e)
	require.NoError(t, dl.SetDenied(ctx(t), "tenant-9", true))
	noOutcome(t, w, 500*time.Millisecond, "after the deny-list update")
	require.EqualValues(t, 1, l.Stats().Queued)
	require.Equal(t, before+1, limScripts(t, e), "only the deny-list write ran: no retry, no deny-list read")

	require.NoError(t, l.Update(ctx(t), ratelimit.FixedWindow{Limit: 1, Window: 2 * time.Minute}, ratelimit.Adopt))
	o := limRecv(t, w)
	require.ErrorIs(t, o.err, ratelimit.ErrDenied)
}

// testRejectedMigrationKeepsQueue: a migration the script rejects before writing keeps the old
// settings and the queue. Limiter A (a composite) has a request queued; another process migrates the
// key to a composite of another configuration; A's own Migrate then finds a stored configuration other
// than its own and fails with ErrConfigMismatch: A's policy is unchanged, the request is still queued
// and undisturbed (no outcome), and it ends only when A closes.
func testRejectedMigrationKeepsQueue(t *testing.T, e *env) {
	comp := func(perMin int64, hour time.Duration) ratelimit.Composite {
		return ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: perMin, Window: time.Minute},
			ratelimit.FixedWindow{Limit: 100, Window: hour},
		}}
	}
	key := e.key(t)
	a, err := ratelimit.New(e.NewClient(t, nil, matrix.NoCache), key, comp(1, time.Hour), ratelimit.WithQueue(10, ratelimit.OldestFirst))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	limExhaust(t, a, 1)
	w := limWaitAsync(ctx(t), a, "w", 1)
	limWaitQueued(t, a, 1)

	other := e.limiter(t, nil, key, comp(1, time.Hour))
	require.NoError(t, other.Update(ctx(t), comp(1, 2*time.Hour), ratelimit.Migrate))

	err = a.Update(ctx(t), comp(2, time.Hour), ratelimit.Migrate)
	require.ErrorIs(t, err, ratelimit.ErrConfigMismatch)
	require.Equal(t, ratelimit.Policy(comp(1, time.Hour)), a.Policy(), "the old settings are kept")
	require.EqualValues(t, 1, a.Stats().Queued, "the queue is kept")
	noOutcome(t, w, 300*time.Millisecond, "after the rejected migration")

	require.NoError(t, a.Close(context.Background()))
	o := limRecv(t, w)
	require.ErrorIs(t, o.err, ratelimit.ErrClosed)
}

// testSegmentShrink: after a sliding window's segment width shrinks, a larger old segment can keep
// delaying expiry. One permit of a 1s window in one segment (width 1000ms) is charged to the segment
// ending at ceil(t/1000)·1000; migrating to 10 segments (width 100ms) keeps that segment, whose permit
// then still counts until its old end + Window, not until the new width's ceil(t/100)·100 + Window.
func testSegmentShrink(t *testing.T, e *env) {
	const window = time.Second
	l := e.limiter(t, nil, e.key(t), ratelimit.SlidingWindow{Limit: 1, Window: window, Segments: 1})
	first, err := l.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.True(t, first.Allowed)
	t0 := first.At.UnixMilli()
	oldEnd := (t0 + 999) / 1000 * 1000
	newEnd := (t0 + 99) / 100 * 100

	require.NoError(t, l.Update(ctx(t), ratelimit.SlidingWindow{Limit: 1, Window: window, Segments: 10}, ratelimit.Migrate))
	res, err := l.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "the old segment's permit still counts")
	until := res.At.UnixMilli() + res.RetryAfter.Milliseconds()
	require.InDelta(t, oldEnd+window.Milliseconds(), until, 1,
		"the permit counts until the old segment's end (%d) + the window, not the new width's end (%d)", oldEnd, newEnd)
}

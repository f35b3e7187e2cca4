package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// limiterInFlightScenarios returns the scenarios of this file.
func limiterInFlightScenarios() []scenario {
	return []scenario{
		{Name: "limiter_queue_cancel_in_flight_uncertain", Run: limQueueCancelInFlight, StandaloneOnly: true},
		{Name: "limiter_queue_close_in_flight_uncertain", Run: limQueueCloseInFlight, StandaloneOnly: true},
	}
}

// limQueueInFlight queues a request whose attempt the queue's goroutine sends to a paused server, then
// ends it with stop (a cancellation or Close). It returns the request's outcome and whether the
// attempt reached the server (counted in commandstats once the server resumes).
func limQueueInFlight(t *testing.T, e *env, stop func(l *ratelimit.Limiter, cancel context.CancelFunc)) (limOutcome, bool) {
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithQueue(5, ratelimit.NewestFirst))
	limExhaust(t, l, 1)
	// a waits about a minute at the tail of a NewestFirst queue.
	a := limWaitAsync(ctx(t), l, "a", 1)
	limWaitQueued(t, l, 1)

	before := limScripts(t, e)
	e.Srv.MustPause(t)
	resumed := false
	defer func() {
		if !resumed {
			e.Srv.MustResume(t)
		}
	}()
	// b joins a non-empty queue without deciding first and is the head at once (newest first): the
	// queue's goroutine sends its attempt, which the paused server does not answer.
	bctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	b := limWaitAsync(bctx, l, "b", 1)
	limWaitQueued(t, l, 2)
	time.Sleep(300 * time.Millisecond) // room for the attempt to be written (checked below, not assumed)
	stop(l, cancel)
	ob := limRecv(t, b)
	e.Srv.MustResume(t)
	resumed = true

	sent := false
	deadline := time.Now().Add(5 * time.Second)
	for !sent && time.Now().Before(deadline) {
		sent = limScripts(t, e) > before
		if !sent {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.NoError(t, l.Close(context.Background()))
	oa := limRecv(t, a)
	require.ErrorIs(t, oa.err, ratelimit.ErrClosed)
	return ob, sent
}

// A queued request cancelled while its attempt is in flight must report ErrUncertain (the
// script may have consumed the permit), like AllowN does; a request cancelled before any attempt was
// sent reports the plain context error.
func limQueueCancelInFlight(t *testing.T, e *env) {
	ob, sent := limQueueInFlight(t, e, func(_ *ratelimit.Limiter, cancel context.CancelFunc) { cancel() })
	require.ErrorIs(t, ob.err, context.Canceled)
	if sent {
		require.ErrorIs(t, ob.err, ratelimit.ErrUncertain, "cancelled while its attempt was in flight")
	} else {
		// Not executed: ErrUncertain is still allowed (the script may have been written to a
		// connection the client then dropped), never required.
		t.Logf("the attempt was not executed: %v", ob.err)
	}
}

// Close while a queued request's attempt is in flight fails it with ErrClosed that also
// wraps ErrUncertain when the attempt reached the server.
func limQueueCloseInFlight(t *testing.T, e *env) {
	ob, sent := limQueueInFlight(t, e, func(l *ratelimit.Limiter, _ context.CancelFunc) {
		done := make(chan struct{})
		go func() { _ = l.Close(context.Background()); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("Close did not return while an attempt was in flight")
		}
	})
	require.ErrorIs(t, ob.err, ratelimit.ErrClosed)
	if sent {
		require.ErrorIs(t, ob.err, ratelimit.ErrUncertain, "closed while its attempt was in flight")
	} else {
		t.Logf("the attempt was not executed: %v", ob.err)
	}
}

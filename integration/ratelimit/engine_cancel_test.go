package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// engineCancelScenarios returns the scenarios of this file.
func engineCancelScenarios() []scenario {
	return []scenario{
		{Name: "engine_cancel_with_deadline_returns", Run: engCancelWithDeadline, StandaloneOnly: true},
	}
}

// A decision whose context has a (distant) deadline and is cancelled while the server does
// not answer returns at the cancellation with ErrUncertain, and a queued request's attempt ends at
// Close the same way, without waiting for the deadline or the connection's timeout. (With the deadline
// on the wire rueidis sent the script synchronously with a socket deadline and ignored the
// cancellation: the decision, and Close waiting for the queue's attempt, blocked until the deadline.)
// The client's connection timeout is longer than the scenario, so only the cancellation can end the
// calls while the server is paused.
func engCancelWithDeadline(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache, matrix.OneConn, func(o *rueidis.ClientOption) { o.ConnWriteTimeout = 5 * time.Minute })
	l := e.limiter(t, c, e.key(t), ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithQueue(5, ratelimit.NewestFirst))
	// The probe dials the client's one connection (matrix.OneConn) and loads the script; it writes
	// nothing.
	_, err := l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	limExhaust(t, l, 1)
	a := limWaitAsync(ctx(t), l, "a", 1) // waits about a minute at the tail
	limWaitQueued(t, l, 1)

	e.Srv.MustPause(t)
	defer e.Srv.MustResume(t)
	guard := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not return while the server was paused", what)
		}
	}

	// A direct decision, cancelled well before its deadline.
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var derr error
	done := make(chan struct{})
	go func() {
		_, derr = l.AllowN(dctx, 0)
		close(done)
	}()
	time.Sleep(200 * time.Millisecond) // on the wire (the assertion holds either way)
	cancel()
	guard(done, "a cancelled AllowN")
	require.ErrorIs(t, derr, context.Canceled)

	// b is the head of the NewestFirst queue at once: the queue's attempt for it is on the wire
	// (its context has a deadline) when Close cancels it.
	b := limWaitAsync(ctx(t), l, "b", 1)
	limWaitQueued(t, l, 2)
	time.Sleep(200 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		_ = l.Close(context.Background())
		close(closed)
	}()
	guard(closed, "Close")
	require.ErrorIs(t, limRecv(t, b).err, ratelimit.ErrClosed)
	require.ErrorIs(t, limRecv(t, a).err, ratelimit.ErrClosed)
}

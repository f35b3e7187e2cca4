package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

// limScripts returns how many scripts (EVAL and EVALSHA, read-only variants included) every server
// process of the target has run.
func limScripts(t *testing.T, e *env) int64 {
	t.Helper()
	st := e.CommandStats(t)
	return st["eval"] + st["evalsha"] + st["eval_ro"] + st["evalsha_ro"]
}

// limWaitQueued waits until l's queue holds want permits: the way a scenario knows that a WaitN
// started in another goroutine has entered the queue (the assertions are on outcomes, never on how
// long this took).
func limWaitQueued(t *testing.T, l interface{ Stats() ratelimit.Stats }, want int64) {
	t.Helper()
	require.Eventually(t, func() bool { return l.Stats().Queued == want }, 20*time.Second, time.Millisecond,
		"queue never held %d permits (now %d)", want, l.Stats().Queued)
}

// limOutcome is the outcome of a WaitN run in its own goroutine.
type limOutcome struct {
	name string
	res  ratelimit.Result
	err  error
}

// limWaitAsync runs l.WaitN(ctx, n) in a goroutine and delivers its outcome on the returned channel.
func limWaitAsync(ctx context.Context, l *ratelimit.Limiter, name string, n int64) <-chan limOutcome {
	ch := make(chan limOutcome, 1)
	go func() {
		res, err := l.WaitN(ctx, n)
		ch <- limOutcome{name: name, res: res, err: err}
	}()
	return ch
}

// limRecv receives one outcome, failing the test if none arrives within the scenario's time.
func limRecv(t *testing.T, ch <-chan limOutcome) limOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no outcome from a waiting request")
		return limOutcome{}
	}
}

// limExhaust takes every permit of l now (its policy's capacity, given as limit).
func limExhaust(t *testing.T, l *ratelimit.Limiter, limit int64) ratelimit.Result {
	t.Helper()
	res, err := l.AllowN(ctx(t), limit)
	require.NoError(t, err)
	require.True(t, res.Allowed, "taking all %d permits: %+v", limit, res)
	return res
}

package latch_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/latch"
)

// env is one running target shared by the scenarios of that target; scenarios run one after another on
// it, each on its own keys.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// latches returns Latches over a new client of its own.
func (e *env) latches(t *testing.T, opts ...latch.Option) *latch.Latches {
	t.Helper()
	return newLatches(t, e.NewClient(t, nil), opts...)
}

func newLatches(t *testing.T, c rueidis.Client, opts ...latch.Option) *latch.Latches {
	t.Helper()
	ls, err := latch.New(c, opts...)
	require.NoError(t, err)
	return ls
}

// Raw server state, read through the assertion client.

// hash returns the fields of the hash at key (empty when absent).
func (e *env) hash(t *testing.T, key string) map[string]string {
	t.Helper()
	m, err := e.Raw.Do(ctx(t), e.Raw.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// requireLatch asserts that key holds generation gen with count remaining.
func (e *env) requireLatch(t *testing.T, key, gen, count string) {
	t.Helper()
	h := e.hash(t, key)
	require.Equal(t, gen, h["gen"], "stored generation")
	require.Equal(t, count, h["count"], "stored count")
}

func (e *env) requireAbsent(t *testing.T, key, what string) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, key), "%s must be absent", what)
}

// shardSubscribers returns the number of sharded Pub/Sub subscribers of channel on its node.
func (e *env) shardSubscribers(t *testing.T, channel string) int64 {
	t.Helper()
	arr, err := e.Raw.Do(ctx(t), e.Raw.B().PubsubShardnumsub().Channel(channel).Build()).ToArray()
	require.NoError(t, err)
	require.Len(t, arr, 2)
	n, err := arr[1].AsInt64()
	require.NoError(t, err)
	return n
}

// requireNoSubscribers asserts that no connection is subscribed to the latch's channel any more
// (every Wait dropped its subscription). Unsubscribing is synchronous, but allow a moment for other
// clients' SUNSUBSCRIBE to land.
func (e *env) requireNoSubscribers(t *testing.T, channel string) {
	t.Helper()
	require.Eventually(t, func() bool { return e.shardSubscribers(t, channel) == 0 }, 5*time.Second, 20*time.Millisecond,
		"every waiter must have dropped its subscription")
}

// waitResult is the outcome of one Wait in a goroutine.
type waitResult struct {
	err     error
	elapsed time.Duration
}

// goWait runs l.Wait(c) in a goroutine and returns the channel of its result.
func goWait(c context.Context, l *latch.Latch) <-chan waitResult {
	out := make(chan waitResult, 1)
	start := time.Now()
	go func() {
		err := l.Wait(c)
		out <- waitResult{err: err, elapsed: time.Since(start)}
	}()
	return out
}

// result waits (at most within) for a goWait result.
func result(t *testing.T, ch <-chan waitResult, within time.Duration) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("Wait did not return within %v", within)
		return waitResult{}
	}
}

// requirePending asserts the Wait has not returned yet (after a short grace period).
func requirePending(t *testing.T, ch <-chan waitResult, grace time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Wait returned early: %+v", r)
	case <-time.After(grace):
	}
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

package semaphore_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/semaphore"
)

// capacityMember is the reserved sorted-set member that stores the capacity (scored -capacity).
const capacityMember = "#capacity"

// env is one running target shared by the scenarios of that target; scenarios run one after another on
// it, each on its own key.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// trackedClient returns a client of the target built by luakit.NewTrackedClient (RESP3, client-side
// caching on, invalidations wired to its own tracker, which semaphore.New finds), closed at t.Cleanup.
func (e *env) trackedClient(t *testing.T) rueidis.Client {
	t.Helper()
	return e.NewClient(t, luakit.NewTracker())
}

// newSem returns a Semaphore over c, shut down at t.Cleanup (registered after the client's Close, so it
// runs first: cleanups run last-in first-out).
func newSem(t *testing.T, c rueidis.Client, key string, capacity int64, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(c, key, capacity, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Close(sctx))
	})
	return s
}

// Raw server state, read through the assertion client.

// members returns the sorted set at key as member → score (math.Inf(1) for +inf).
func (e *env) members(t *testing.T, key string) map[string]float64 {
	t.Helper()
	zs, err := e.Raw.Do(ctx(t), e.Raw.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, z := range zs {
		out[z.Member] = z.Score
	}
	return out
}

// permits returns the number of permit members at key (the capacity member excluded).
func (e *env) permits(t *testing.T, key string) int {
	t.Helper()
	m := e.members(t, key)
	delete(m, capacityMember)
	return len(m)
}

// zcard returns ZCARD key.
func (e *env) zcard(t *testing.T, key string) int64 {
	t.Helper()
	n, err := e.Raw.Do(ctx(t), e.Raw.B().Zcard().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// do runs a raw command (the key must be args[1] so a cluster client routes it).
func (e *env) do(t *testing.T, args ...string) rueidis.RedisMessage {
	t.Helper()
	m, err := e.Raw.Do(ctx(t), e.Raw.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).ToMessage()
	require.NoError(t, err, "%q", args[0])
	return m
}

func (e *env) requireAbsent(t *testing.T, key, what string) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, key), "%s must be absent", what)
}

// requireGone asserts that key is absent within d (a permit expiring on the server takes the key with it).
func (e *env) requireGone(t *testing.T, key string, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for e.PTTL(t, key) != -2 {
		require.True(t, time.Now().Before(deadline), "%s must be gone within %v", what, d)
		time.Sleep(5 * time.Millisecond)
	}
}

// requireCapacity asserts the stored capacity.
func (e *env) requireCapacity(t *testing.T, key string, want int64) {
	t.Helper()
	score, ok := e.members(t, key)[capacityMember]
	require.True(t, ok, "capacity member must exist")
	require.Equal(t, -float64(want), score, "stored capacity")
}

// requirePermit asserts that owner holds a permit at key: finite (expiry in the future, key expiry at or
// after it) or, with noExpiry, scored +inf and the key persistent.
func (e *env) requirePermit(t *testing.T, key string, p *semaphore.Permit, noExpiry bool) {
	t.Helper()
	score, ok := e.members(t, key)[p.OwnerToken()]
	require.True(t, ok, "owner's permit must be a member")
	if noExpiry {
		require.True(t, math.IsInf(score, 1), "a permit without expiry is scored +inf, got %v", score)
		require.EqualValues(t, -1, e.PTTL(t, key), "key with a non-expiring permit must not expire")
		return
	}
	now := e.serverMillis(t)
	require.Greater(t, score, float64(now), "permit expiry must be in the future")
	require.Greater(t, e.PTTL(t, key), int64(0), "key must have an expiry while every permit is finite")
}

// serverMillis returns the server's clock in ms (TIME).
func (e *env) serverMillis(t *testing.T) int64 {
	t.Helper()
	arr, err := e.Raw.Do(ctx(t), e.Raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, err := strconv.ParseInt(arr[0], 10, 64)
	require.NoError(t, err)
	usec, err := strconv.ParseInt(arr[1], 10, 64)
	require.NoError(t, err)
	return sec*1000 + usec/1000
}

// release releases p and asserts the outcome.
func release(t *testing.T, p *semaphore.Permit, want semaphore.ReleaseOutcome) {
	t.Helper()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := p.Release(rctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "release outcome")
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

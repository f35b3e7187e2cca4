package idempotency_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
)

// env is one running target shared by the scenarios of that target; scenarios run in order on it,
// each on its own keys.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// resp2 makes a RESP2 client (client-side caching needs RESP3, so it is disabled).
func resp2(o *rueidis.ClientOption) { o.AlwaysRESP2, o.DisableCache = true, true }

// store returns a Store over a new client of its own.
func (e *env) store(t *testing.T, opts ...idempotency.Option) *idempotency.Store {
	t.Helper()
	s, err := idempotency.New(e.NewClient(t, nil), opts...)
	require.NoError(t, err)
	return s
}

// trackedStore returns a Store over a new tracker-wired client, with idempotency.WithTracker.
func (e *env) trackedStore(t *testing.T, opts ...idempotency.Option) *idempotency.Store {
	t.Helper()
	tr := luakit.NewTracker()
	s, err := idempotency.New(e.NewClient(t, tr), append([]idempotency.Option{idempotency.WithTracker(tr)}, opts...)...)
	require.NoError(t, err)
	return s
}

// hash returns every field of the claim hash at key (empty when absent).
func (e *env) hash(t *testing.T, key string) map[string]string {
	t.Helper()
	m, err := e.Raw.Do(ctx(t), e.Raw.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// requirePending asserts that key holds a pending claim with an expiry of at most ttl.
func (e *env) requirePending(t *testing.T, key string, ttl time.Duration) map[string]string {
	t.Helper()
	h := e.hash(t, key)
	require.Equal(t, "p", h["s"], "claim must be pending: %v", keysOf(h))
	require.Len(t, h["t"], 32, "pending claim holds the owner token")
	require.NotContains(t, h, "r", "pending claim holds no result")
	p := e.PTTL(t, key)
	require.Greater(t, p, int64(0))
	require.LessOrEqual(t, p, ttl.Milliseconds())
	return h
}

// requireCompleted asserts that key holds a completed claim with result and an expiry of at most ttl.
func (e *env) requireCompleted(t *testing.T, key string, result []byte, ttl time.Duration) {
	t.Helper()
	h := e.hash(t, key)
	require.Equal(t, "c", h["s"], "claim must be completed")
	require.NotContains(t, h, "t", "a completed claim keeps no owner token")
	require.Equal(t, string(result), h["r"], "stored result")
	p := e.PTTL(t, key)
	require.Greater(t, p, int64(0))
	require.LessOrEqual(t, p, ttl.Milliseconds())
}

func (e *env) requireAbsent(t *testing.T, key string) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, key), "key must be absent")
}

// waitGone waits until key no longer exists (after its expiry).
func (e *env) waitGone(t *testing.T, key string) {
	t.Helper()
	require.Eventually(t, func() bool { return e.PTTL(t, key) == -2 }, 10*time.Second, 5*time.Millisecond)
}

// scriptFlush empties the script cache of every server process of the target.
func (e *env) scriptFlush(t *testing.T) {
	t.Helper()
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "SCRIPT", "FLUSH")
		require.NoError(t, err)
	}
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

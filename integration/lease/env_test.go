package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
)

// env is one running target shared by the scenarios of that target. Scenarios run one after another on
// it, each on its own keys.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// leases returns a Leases over a new client of its own.
func (e *env) leases(t *testing.T, opts ...lease.Option) *lease.Leases {
	t.Helper()
	return newLeases(t, e.NewClient(t, nil), opts...)
}

// trackedLeases returns a Leases over a new tracker-wired client, wired with lease.WithTracker.
func (e *env) trackedLeases(t *testing.T, opts ...lease.Option) *lease.Leases {
	t.Helper()
	tr := luakit.NewTracker()
	return newLeases(t, e.NewClient(t, tr), append([]lease.Option{lease.WithTracker(tr)}, opts...)...)
}

func newLeases(t *testing.T, c rueidis.Client, opts ...lease.Option) *lease.Leases {
	t.Helper()
	ls, err := lease.New(c, opts...)
	require.NoError(t, err)
	return ls
}

// Raw server state, read through the assertion client.

// do runs a raw command (the key, if any, must be args[1] so a cluster client routes it).
func (e *env) do(t *testing.T, args ...string) *rueidis.RedisMessage {
	t.Helper()
	m, err := e.Raw.Do(ctx(t), e.Raw.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).ToMessage()
	require.NoError(t, err, "%q", args[0])
	return &m
}

// hget returns the value of field in the hash at key and whether it exists.
func (e *env) hget(t *testing.T, key, field string) (string, bool) {
	t.Helper()
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Hget().Key(key).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	require.NoError(t, err)
	return v, true
}

// hpttl returns the server's HPTTL of field (-2 absent, -1 no expiry).
func (e *env) hpttl(t *testing.T, key, field string) int64 {
	t.Helper()
	m := e.do(t, "HPTTL", key, "FIELDS", "1", field)
	arr, err := m.AsIntSlice()
	require.NoError(t, err)
	require.Len(t, arr, 1)
	return arr[0]
}

// requireAbsent asserts that key does not exist on the server.
func (e *env) requireAbsent(t *testing.T, key, what string) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, key), "%s must be absent", what)
}

// requireHeld asserts that the field holds owner, with a field expiry, in a hash without key expiry.
func (e *env) requireHeld(t *testing.T, key, field, owner string) {
	t.Helper()
	v, ok := e.hget(t, key, field)
	require.True(t, ok, "field must exist")
	require.Equal(t, owner, v, "field must hold the owner token")
	require.Greater(t, e.hpttl(t, key, field), int64(0), "field must have an expiry")
	require.EqualValues(t, -1, e.PTTL(t, key), "hash key must have no key-level expiry")
}

// requireFieldAbsent asserts that the field does not exist.
func (e *env) requireFieldAbsent(t *testing.T, key, field string) {
	t.Helper()
	_, ok := e.hget(t, key, field)
	require.False(t, ok, "field must be absent")
}

// scriptFlush empties the script cache of every server process of the target.
func (e *env) scriptFlush(t *testing.T) {
	t.Helper()
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "SCRIPT", "FLUSH")
		require.NoError(t, err)
	}
}

// hashKey returns a hash key for one scenario.
func hashKey(name string) string { return "ck:lease:" + name }

// release releases l and asserts the outcome.
func release(t *testing.T, l *lease.Lease, want lease.ReleaseOutcome) {
	t.Helper()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := l.Release(rctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "release outcome")
}

type acquired struct {
	lease *lease.Lease
	err   error
	at    time.Time
}

func acquireAsync(c context.Context, ls *lease.Leases, key, field string, ttl time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := ls.Acquire(c, key, field, ttl)
		ch <- acquired{l, err, time.Now()}
	}()
	return ch
}

func await(t *testing.T, ch <-chan acquired, limit time.Duration) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("Acquire did not return within %v", limit)
		return acquired{}
	}
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

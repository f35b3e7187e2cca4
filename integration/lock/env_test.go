package lock_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// env is one running target shared by the scenarios of that target. Scenarios run one after another on
// it (never in parallel), each on its own keys, so server-wide counters (INFO commandstats, DBSIZE) taken
// inside a scenario see only that scenario's traffic.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// locker returns a Locker over a new client of its own.
func (e *env) locker(t *testing.T, opts ...lock.Option) *lock.Locker {
	t.Helper()
	return newLocker(t, e.NewClient(t, nil), opts...)
}

// trackedLocker returns a Locker over a new tracker-wired client, wired with lock.WithTracker.
func (e *env) trackedLocker(t *testing.T, counter *cmdCounter, opts ...lock.Option) *lock.Locker {
	t.Helper()
	tr := luakit.NewTracker()
	c := e.NewClient(t, tr, counter.counted()...)
	return newLocker(t, c, append([]lock.Option{lock.WithTracker(tr)}, opts...)...)
}

func newLocker(t *testing.T, c rueidis.Client, opts ...lock.Option) *lock.Locker {
	t.Helper()
	l, err := lock.New(c, opts...)
	require.NoError(t, err)
	return l
}

// Raw server state, read through the assertion client.

// get returns the value at key and whether it exists.
func (e *env) get(t *testing.T, key string) (string, bool) {
	t.Helper()
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	require.NoError(t, err)
	return v, true
}

// do runs a raw command (the key, if any, must be args[1] so a cluster client routes it).
func (e *env) do(t *testing.T, args ...string) rueidis.RedisMessage {
	t.Helper()
	m, err := e.Raw.Do(ctx(t), e.Raw.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).ToMessage()
	require.NoError(t, err, "%q", args[0])
	return m
}

// requireAbsent asserts that key does not exist on the server.
func (e *env) requireAbsent(t *testing.T, key, what string) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, key), "%s must be absent", what)
}

// requireLease asserts that the lease key holds owner with an expiry.
func (e *env) requireLease(t *testing.T, key, owner string) {
	t.Helper()
	v, ok := e.get(t, key)
	require.True(t, ok, "lease key must exist")
	require.Equal(t, owner, v, "lease key must hold the owner token")
	require.Greater(t, e.PTTL(t, key), int64(0), "lease key must have an expiry")
}

// requireCounter asserts that the fence key holds want (decimal) and has no expiry.
func (e *env) requireCounter(t *testing.T, key, want string) {
	t.Helper()
	v, ok := e.get(t, key)
	require.True(t, ok, "fence counter must exist")
	require.Equal(t, want, v, "fence counter value")
	require.EqualValues(t, -1, e.PTTL(t, key), "fence counter must not expire")
}

// named returns the name of one scenario's lock ("ck:" + scenario) and the two keys the Locker derives
// from it (lock.Keys), which share the hash tag {ck:<scenario>} (one Cluster slot).
func named(scenario string) (name, leaseKey, fenceKey string) {
	name = "ck:" + scenario
	leaseKey, fenceKey = lock.Keys(name)
	return name, leaseKey, fenceKey
}

// release releases l and asserts the outcome.
func release(t *testing.T, l *lock.Lease, want lock.ReleaseOutcome) {
	t.Helper()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := l.Release(rctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "release outcome")
}

// quantile returns the q-quantile (nearest rank) of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

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
	"github.com/coordkit/coordkit/testkit"
)

// maxParallelTargets bounds how many targets (servers plus their scenarios) run at once. The project's
// machines have 2 cores and the suite runs under -race; more would only add scheduling noise to the
// few timing bounds the scenarios check. (go test's -parallel, GOMAXPROCS by default, bounds it too.)
const maxParallelTargets = 2

var targetSlots = make(chan struct{}, maxParallelTargets)

// env is one running target shared by the scenarios of that target. Scenarios run one after another on
// it (never in parallel), each on its own keys, so server-wide counters (INFO commandstats, DBSIZE) taken
// inside a scenario see only that scenario's traffic.
type env struct {
	name    string
	srv     *testkit.Server   // nil on cluster
	cluster *testkit.Cluster  // nil on standalone
	nodes   []*testkit.Server // every server process (one on standalone)
	raw     rueidis.Client    // assertion client: no client-side caching, never used by a Locker
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	e := &env{name: st.Name}
	if st.Cluster {
		e.cluster = testkit.StartCluster(t, st.Server)
		e.nodes = e.cluster.Nodes
		t.Logf("target %s: %s", st.Name, e.cluster)
	} else {
		e.srv = testkit.Start(t, st.Server)
		e.nodes = []*testkit.Server{e.srv}
		t.Logf("target %s: %s %s at %s (%s backend)", st.Name, e.srv.Flavor, e.srv.Version, e.srv.Addr, e.srv.Backend)
	}
	e.raw = e.newClient(t, nil, nil, func(o *rueidis.ClientOption) { o.DisableCache = true })
	return e
}

func (e *env) isCluster() bool { return e.cluster != nil }

func (e *env) clientOption() rueidis.ClientOption {
	if e.cluster != nil {
		return e.cluster.ClientOption()
	}
	return e.srv.ClientOption()
}

// newClient returns a client of the target, closed at t.Cleanup. With a tracker it is built by
// luakit.NewTrackedClient (invalidations wired to the tracker); with a counter every command it writes
// is counted.
func (e *env) newClient(t *testing.T, tracker *luakit.Tracker, counter *cmdCounter, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	opt := e.clientOption()
	if counter != nil {
		opt.DialCtxFn = counter.dial
	}
	for _, m := range mutate {
		m(&opt)
	}
	var (
		c   rueidis.Client
		err error
	)
	if tracker != nil {
		c, err = luakit.NewTrackedClient(opt, tracker)
	} else {
		c, err = rueidis.NewClient(opt)
	}
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// locker returns a Locker over a new client of its own.
func (e *env) locker(t *testing.T, opts ...lock.Option) *lock.Locker {
	t.Helper()
	return newLocker(t, e.newClient(t, nil, nil), opts...)
}

// trackedLocker returns a Locker over a new tracker-wired client, wired with lock.WithTracker.
func (e *env) trackedLocker(t *testing.T, counter *cmdCounter, opts ...lock.Option) *lock.Locker {
	t.Helper()
	tr := luakit.NewTracker()
	c := e.newClient(t, tr, counter)
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
	v, err := e.raw.Do(ctx(t), e.raw.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	require.NoError(t, err)
	return v, true
}

// pttl returns the server's PTTL of key (-2 absent, -1 no expiry).
func (e *env) pttl(t *testing.T, key string) int64 {
	t.Helper()
	n, err := e.raw.Do(ctx(t), e.raw.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// do runs a raw command (the key, if any, must be args[1] so a cluster client routes it).
func (e *env) do(t *testing.T, args ...string) rueidis.RedisMessage {
	t.Helper()
	m, err := e.raw.Do(ctx(t), e.raw.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).ToMessage()
	require.NoError(t, err, "%q", args[0])
	return m
}

// requireAbsent asserts that key does not exist on the server.
func (e *env) requireAbsent(t *testing.T, key, what string) {
	t.Helper()
	require.EqualValues(t, -2, e.pttl(t, key), "%s must be absent", what)
}

// requireLease asserts that the lease key holds owner with an expiry.
func (e *env) requireLease(t *testing.T, key, owner string) {
	t.Helper()
	v, ok := e.get(t, key)
	require.True(t, ok, "lease key must exist")
	require.Equal(t, owner, v, "lease key must hold the owner token")
	require.Greater(t, e.pttl(t, key), int64(0), "lease key must have an expiry")
}

// requireCounter asserts that the fence key holds want (decimal) and has no expiry.
func (e *env) requireCounter(t *testing.T, key, want string) {
	t.Helper()
	v, ok := e.get(t, key)
	require.True(t, ok, "fence counter must exist")
	require.Equal(t, want, v, "fence counter value")
	require.EqualValues(t, -1, e.pttl(t, key), "fence counter must not expire")
}

// commandStats sums INFO commandstats over every server process of the target.
func (e *env) commandStats(t *testing.T) map[string]int64 {
	t.Helper()
	sum := map[string]int64{}
	for _, n := range e.nodes {
		st, err := n.CommandStats(ctx(t))
		require.NoError(t, err)
		for k, v := range st {
			sum[k] += v
		}
	}
	return sum
}

// waitServing waits until c answers PING again (after a server restart or pause): rueidis replaces a
// broken connection on the next command, and the first command after the old one broke may fail.
func waitServing(t *testing.T, c rueidis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Do(cctx, c.B().Ping().Build()).Error()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not serving again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// keyPair returns a lease key and a fence key for one scenario, sharing a hash tag (same Cluster slot).
func keyPair(name string) (leaseKey, fenceKey string) {
	return "{ck:" + name + "}:lease", "{ck:" + name + "}:fence"
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

package ratelimit_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/testkit"
)

// maxParallelTargets bounds how many targets run at once (2 cores shared, -race).
const maxParallelTargets = 2

var targetSlots = make(chan struct{}, maxParallelTargets)

// env is one running target shared by the scenarios of that target; scenarios run one after another,
// each on its own keys (use e.key).
type env struct {
	name    string
	srv     *testkit.Server   // nil on cluster
	cluster *testkit.Cluster  // nil on standalone
	nodes   []*testkit.Server // every server process
	raw     rueidis.Client    // assertion client, never used by a limiter
	seq     atomic.Int64
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
	e.raw = e.newClient(t)
	return e
}

func (e *env) isCluster() bool { return e.cluster != nil }

// key returns a fresh key for one scenario step: "rl:<test name>:<n>".
func (e *env) key(t *testing.T) string {
	return fmt.Sprintf("rl:%s:%d", t.Name(), e.seq.Add(1))
}

// newClient returns a client of the target (client-side caching off), closed at t.Cleanup.
func (e *env) newClient(t *testing.T, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	var opt rueidis.ClientOption
	if e.cluster != nil {
		opt = e.cluster.ClientOption()
	} else {
		opt = e.srv.ClientOption()
	}
	opt.DisableCache = true
	for _, m := range mutate {
		m(&opt)
	}
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// limiter returns a Limiter over c (a new client when c is nil), closed at t.Cleanup.
func (e *env) limiter(t *testing.T, c rueidis.Client, key string, p ratelimit.Policy, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	if c == nil {
		c = e.newClient(t)
	}
	l, err := ratelimit.New(c, key, p, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// serverMillis returns the server clock (TIME) of the node serving key, in Unix milliseconds.
func (e *env) serverMillis(t *testing.T, key string) int64 {
	t.Helper()
	return nodeMillis(t, e.nodeOf(t, key))
}

// nodeMillis returns node's clock (TIME) in Unix milliseconds.
func nodeMillis(t *testing.T, node *testkit.Server) int64 {
	t.Helper()
	msg, err := node.Do(ctx(t), "TIME")
	require.NoError(t, err)
	v, err := msg.AsStrSlice()
	require.NoError(t, err)
	require.Len(t, v, 2)
	sec, err := strconv.ParseInt(v[0], 10, 64)
	require.NoError(t, err)
	usec, err := strconv.ParseInt(v[1], 10, 64)
	require.NoError(t, err)
	return sec*1000 + usec/1000
}

// nodeOf returns the server process that owns key's slot.
func (e *env) nodeOf(t *testing.T, key string) *testkit.Server {
	t.Helper()
	if e.cluster == nil {
		return e.srv
	}
	n, err := e.cluster.PrimaryOf(ctx(t), int(luakit.Slot(key)))
	require.NoError(t, err)
	return n
}

// pttl returns the server's PTTL of key (-2 absent, -1 no expiry).
func (e *env) pttl(t *testing.T, key string) int64 {
	t.Helper()
	v, err := e.raw.Do(ctx(t), e.raw.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return v
}

// exists reports whether key exists.
func (e *env) exists(t *testing.T, key string) bool {
	t.Helper()
	v, err := e.raw.Do(ctx(t), e.raw.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return v == 1
}

// dumpScript reads a key's type and content in one atomic step (a key cannot expire between TYPE and
// the read, as it could across two commands).
const dumpScript = `local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then return {t, {'', redis.call('GET', KEYS[1])}} end
if t == 'hash' then return {t, redis.call('HGETALL', KEYS[1])} end
return {t, {}}`

// dump returns the raw state at key: a string value as {"": v}, a hash as its fields, nil when absent.
func (e *env) dump(t *testing.T, key string) map[string]string {
	t.Helper()
	arr, err := e.raw.Do(ctx(t), e.raw.B().Eval().Script(dumpScript).Numkeys(1).Key(key).Build()).ToArray()
	require.NoError(t, err)
	require.Len(t, arr, 2)
	typ, err := arr[0].ToString()
	require.NoError(t, err)
	flat, err := arr[1].AsStrSlice()
	require.NoError(t, err)
	switch typ {
	case "none":
		return nil
	case "string", "hash":
		m := make(map[string]string, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			m[flat[i]] = flat[i+1]
		}
		return m
	default:
		t.Fatalf("key %q has unexpected type %s", key, typ)
		return nil
	}
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

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

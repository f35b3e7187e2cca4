package ratelimit_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/testkit"
)

// env is one running target shared by the scenarios of that target; scenarios run one after another,
// each on its own keys (use e.key).
type env struct {
	*matrix.Env
	seq atomic.Int64
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// key returns a fresh key for one scenario step: "rl:<test name>:<n>".
func (e *env) key(t *testing.T) string {
	return fmt.Sprintf("rl:%s:%d", t.Name(), e.seq.Add(1))
}

// limiter returns a Limiter over c (a new client when c is nil), closed at t.Cleanup.
func (e *env) limiter(t *testing.T, c rueidis.Client, key string, p ratelimit.Policy, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	if c == nil {
		c = e.NewClient(t, nil, matrix.NoCache)
	}
	l, err := ratelimit.New(c, key, p, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// serverMillis returns the server clock (TIME) of the node serving key, in Unix milliseconds.
func (e *env) serverMillis(t *testing.T, key string) int64 {
	t.Helper()
	return nodeMillis(t, e.nodeOf(t, key))
}

// serverMicros returns the server clock (TIME) of the node serving key, in Unix microseconds.
func (e *env) serverMicros(t *testing.T, key string) int64 {
	t.Helper()
	return nodeMicros(t, e.nodeOf(t, key))
}

// nodeMillis returns node's clock (TIME) in Unix milliseconds.
func nodeMillis(t *testing.T, node *testkit.Server) int64 {
	t.Helper()
	return nodeMicros(t, node) / 1000
}

// nodeMicros returns node's clock (TIME) in Unix microseconds.
func nodeMicros(t *testing.T, node *testkit.Server) int64 {
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
	return sec*1000000 + usec
}

// nodeOf returns the server process that owns key's slot.
func (e *env) nodeOf(t *testing.T, key string) *testkit.Server {
	t.Helper()
	if e.Cluster == nil {
		return e.Srv
	}
	n, err := e.Cluster.PrimaryOf(ctx(t), int(luakit.Slot(key)))
	require.NoError(t, err)
	return n
}

// exists reports whether key exists.
func (e *env) exists(t *testing.T, key string) bool {
	t.Helper()
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Exists().Key(key).Build()).AsInt64()
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
	arr, err := e.Raw.Do(ctx(t), e.Raw.B().Eval().Script(dumpScript).Numkeys(1).Key(key).Build()).ToArray()
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

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

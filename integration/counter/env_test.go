package counter_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// env is one running target shared by the scenarios of that target; scenarios run one after another,
// each on its own keys.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// store returns a Store over a new client of its own, closed at t.Cleanup (before the client).
func (e *env) store(t *testing.T, opts ...counter.Option) *counter.Store {
	t.Helper()
	return newStore(t, e.NewClient(t, nil, matrix.NoCache), opts...)
}

func newStore(t *testing.T, c rueidis.Client, opts ...counter.Option) *counter.Store {
	t.Helper()
	s, err := counter.New(c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

// get returns the raw value at key and whether it exists.
func (e *env) get(t *testing.T, key string) (string, bool) {
	t.Helper()
	v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	require.NoError(t, err)
	return v, true
}

// set writes a raw string value (no expiry).
func (e *env) set(t *testing.T, key, value string) {
	t.Helper()
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value(value).Build()).Error())
}

// requireValue asserts that key holds want (decimal) and its PTTL satisfies check.
func (e *env) requireValue(t *testing.T, key, want string) {
	t.Helper()
	v, ok := e.get(t, key)
	require.True(t, ok, "counter key must exist")
	require.Equal(t, want, v, "counter value")
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

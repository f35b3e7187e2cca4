package counter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// testDisconnect kills the server (on Cluster: the primary of the key's slot) under a warm store: the
// first call fails with ErrDisconnected in well under the client's 5 s write timeout, later calls fail
// at once without touching the client, and after a restart calls succeed again without any action.
// It runs last on each target: the restarted server (node) comes back empty.
func testDisconnect(t *testing.T, e *env) {
	const writeTimeout = 5 * time.Second
	key := "ck:disconnect"
	var node *testkit.Server
	if e.IsCluster() {
		var err error
		node, err = e.Cluster.PrimaryOf(ctx(t), int(luakit.Slot(key)))
		require.NoError(t, err)
	} else {
		node = e.Srv
	}
	c := e.newClient(t, func(o *rueidis.ClientOption) { o.ConnWriteTimeout = writeTimeout })
	s := newStore(t, c, counter.WithProbeInterval(50*time.Millisecond), counter.WithProbeTimeout(500*time.Millisecond))
	res, err := s.IncrementIfLessThan(ctx(t), key, 1, 100, 0)
	require.NoError(t, err)
	require.True(t, res.Allowed)

	require.NoError(t, node.Kill())
	start := time.Now()
	_, err = s.IncrementIfLessThan(ctx(t), key, 1, 100, 0)
	first := time.Since(start)
	require.ErrorIs(t, err, counter.ErrDisconnected, "first call after the kill")
	require.Less(t, first, writeTimeout/5, "the first call must fail well under the client's timeout")
	require.False(t, s.Connected())

	var worst time.Duration
	for range 20 {
		start := time.Now()
		_, err := s.IncrementIfLessThan(ctx(t), key, 1, 100, 0)
		el := time.Since(start)
		require.ErrorIs(t, err, counter.ErrDisconnected)
		worst = max(worst, el)
		_, err = s.Get(ctx(t), key)
		require.ErrorIs(t, err, counter.ErrDisconnected)
	}
	require.Less(t, worst, 200*time.Millisecond, "calls while disconnected must fail at once")
	t.Logf("disconnect on %s: first call failed after %v (%v); later calls at most %v; client write timeout %v",
		e.Name, first.Round(time.Microsecond), err, worst.Round(time.Microsecond), writeTimeout)

	// Caller policy example: fail open or closed on ErrDisconnected.
	for _, failOpen := range []bool{true, false} {
		allowed := quotaAllows(s, key, failOpen)
		require.Equal(t, failOpen, allowed)
	}

	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, node.Restart(rctx))
	start = time.Now()
	require.Eventually(t, s.Connected, 30*time.Second, 10*time.Millisecond, "the probe must notice the server is back")
	t.Logf("reconnected %v after the restart", time.Since(start).Round(time.Millisecond))
	require.Eventually(t, func() bool {
		res, err = s.IncrementIfLessThan(ctx(t), key, 1, 100, time.Minute)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "calls succeed again without action: %v", err)
	require.True(t, res.Allowed)
	require.EqualValues(t, 1, res.Value, "the restarted server is empty")
	e.requireValue(t, key, "1")
	// The assertion client may hold a broken connection to the restarted node; it reconnected above.
}

// quotaAllows shows how a caller chooses what an unreachable counter means.
func quotaAllows(s *counter.Store, key string, failOpen bool) bool {
	res, err := s.IncrementIfLessThan(context.Background(), key, 1, 100, time.Minute)
	if err != nil {
		if errorsIsDisconnected(err) {
			return failOpen
		}
		return false
	}
	return res.Allowed
}

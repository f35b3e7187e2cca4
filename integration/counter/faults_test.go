package counter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
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
	c := e.NewClient(t, nil, matrix.NoCache, func(o *rueidis.ClientOption) { o.ConnWriteTimeout = writeTimeout })
	s := newStore(t, c, counter.WithProbeInterval(50*time.Millisecond), counter.WithProbeTimeout(500*time.Millisecond))
	res, err := s.IncrementUpTo(ctx(t), key, 1, 100, 0)
	require.NoError(t, err)
	require.True(t, res.Allowed)

	require.NoError(t, node.Kill())
	start := time.Now()
	_, err = s.IncrementUpTo(ctx(t), key, 1, 100, 0)
	first := time.Since(start)
	require.ErrorIs(t, err, counter.ErrDisconnected, "first call after the kill")
	require.Less(t, first, writeTimeout/5, "the first call must fail well under the client's timeout")
	require.False(t, s.Connected())

	var worst time.Duration
	for range 20 {
		start := time.Now()
		_, err := s.IncrementUpTo(ctx(t), key, 1, 100, 0)
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
		res, err = s.IncrementUpTo(ctx(t), key, 1, 100, time.Minute)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "calls succeed again without action: %v", err)
	require.True(t, res.Allowed)
	require.EqualValues(t, 1, res.Value, "the restarted server is empty")
	e.requireValue(t, key, "1")
	// The assertion client may hold a broken connection to the restarted node; it reconnected above.
}

// testCloseBoundedByCtx pauses the server (on Cluster: the primary of the key's slot) under a
// Buffered whose background flush is in flight and a Bounded whose reservation is in flight: each
// Close returns when its ctx ends, with an error wrapping it, instead of waiting for the server;
// later calls fail with ErrClosed. After the resume the cancelled flush's delta is either applied
// once or lost, as documented for an uncertain flush, and the flush error reported says so.
func testCloseBoundedByCtx(t *testing.T, e *env) {
	const closeWait = 200 * time.Millisecond
	bufKey, bndKey := "ck:close:{c}:buffered", "ck:close:{c}:bounded"
	node := e.Srv
	if e.IsCluster() {
		var err error
		node, err = e.Cluster.PrimaryOf(ctx(t), int(luakit.Slot(bufKey)))
		require.NoError(t, err)
		require.Equal(t, luakit.Slot(bufKey), luakit.Slot(bndKey), "keys of one node")
	}
	flushErrs := make(chan error, 10)
	// Warm stores, each on one connection (matrix.OneConn): a store's first call reads its key before
	// writing, and this scenario is about a write in flight on an open connection (one still dialling
	// waits for the dial timeout, a case Close's doc states apart).
	bufStore := newStore(t, e.NewClient(t, nil, matrix.NoCache, matrix.OneConn))
	bndStore := newStore(t, e.NewClient(t, nil, matrix.NoCache, matrix.OneConn))
	_, err := bufStore.Get(ctx(t), bufKey)
	require.NoError(t, err)
	_, err = bndStore.Get(ctx(t), bndKey)
	require.NoError(t, err)
	b, err := counter.NewBuffered(bufStore, bufKey, counter.WithFlushInterval(10*time.Millisecond),
		counter.WithFlushTimeout(time.Minute), counter.WithFlushErrorHandler(func(err error) { flushErrs <- err }))
	require.NoError(t, err)
	bnd, err := counter.NewBounded(bndStore, bndKey, 100, counter.WithChunk(10))
	require.NoError(t, err)

	node.MustPause(t)
	paused := true
	defer func() {
		if paused {
			node.MustResume(t)
		}
	}()
	require.NoError(t, b.Add(5))
	require.Eventually(t, func() bool { return b.Pending() == 0 }, 5*time.Second, time.Millisecond,
		"the background flush takes the delta")
	added := make(chan error, 1)
	go func() {
		_, err := bnd.TryAdd(context.Background(), 1)
		added <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the reservation reach the connection

	for name, closeFn := range map[string]func(context.Context) error{"buffered": b.Close, "bounded": bnd.Close} {
		cctx, cancel := context.WithTimeout(context.Background(), closeWait)
		start := time.Now()
		err := closeFn(cctx)
		el := time.Since(start)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s Close", name)
		require.True(t, strings.HasPrefix(err.Error(), "counter: "), "%q", err)
		require.Less(t, el, closeWait+time.Second, "%s Close must return when its ctx ends", name)
		t.Logf("%s Close with a paused server returned after %v: %v", name, el.Round(time.Millisecond), err)
	}
	require.ErrorIs(t, b.Add(1), counter.ErrClosed)
	require.ErrorIs(t, b.Flush(ctx(t)), counter.ErrClosed)

	// Close cancels the flush and returns; the cancellation reaches the flush a moment later. While
	// the server stays paused no reply can beat it, so the flush must end reported as uncertain (after
	// a resume its reply could win, and the flush would count: Close's doc says "may").
	select {
	case err := <-flushErrs:
		require.ErrorIs(t, err, counter.ErrUncertain, "the cancelled flush is reported as uncertain")
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled background flush was not reported")
	}
	node.MustResume(t)
	paused = false
	require.NoError(t, <-added, "the reservation in flight completes after the resume")
	require.NoError(t, bnd.Close(ctx(t)), "a later Close gives the headroom back")
	require.Zero(t, bnd.Headroom())
	_, err = bnd.TryAdd(ctx(t), 1)
	require.ErrorIs(t, err, counter.ErrClosed)
	require.NoError(t, b.Close(ctx(t)), "nothing is pending: a later Close sends nothing")
	if v, ok := e.get(t, bufKey); ok {
		require.Equal(t, "5", v, "an uncertain flush is applied at most once")
	}
	e.requireValue(t, bndKey, "1")
}

// quotaAllows shows how a caller chooses what an unreachable counter means.
func quotaAllows(s *counter.Store, key string, failOpen bool) bool {
	res, err := s.IncrementUpTo(context.Background(), key, 1, 100, time.Minute)
	if err != nil {
		if errorsIsDisconnected(err) {
			return failOpen
		}
		return false
	}
	return res.Allowed
}

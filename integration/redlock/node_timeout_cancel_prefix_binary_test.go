package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/redlock"
)

// testDefaultNodeTimeout: without WithNodeTimeout, an acquisition with one node paused waits for that
// node exactly the default 1s before giving it up: the lock is acquired on the four others and its
// validity (TTL − elapsed − drift, measured by the library) is at least 1s shorter than the TTL, and
// not much more (a longer default would show).
func testDefaultNodeTimeout(t *testing.T, e *env) {
	require.Equal(t, time.Second, redlock.DefaultNodeTimeout)
	key := keyOf(t)
	const ttl = 30 * time.Second
	g := e.group(t)
	e.warm(t, key)
	resume := e.pause(t, 4)
	l, err := g.TryAcquire(ctx(t), key, ttl)
	require.NoError(t, err)
	resume()
	rem := l.Remaining()
	t.Logf("remaining %v of %v with one node paused under the default node timeout", rem, ttl)
	require.Less(t, rem, ttl-time.Second, "the paused node was waited for the whole node timeout (1s)")
	require.Greater(t, rem, ttl-4*time.Second, "the node timeout is not longer than the default 1s (+ slack)")
	h := e.holders(t, key)
	require.Len(t, h[0], 32)
	for i := 1; i < 4; i++ {
		require.Equal(t, h[0], h[i], "node %d holds the token", i) // node 4 may apply its SET late
	}
	outcome, err := l.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, redlock.Released, outcome)
	e.requireAbsent(t, key)
}

// testExtendCancelledMidFlight: as redlock's doc says, following the shared ownership contract, an
// Extend cancelled mid-flight is uncertain and the lock keeps its previous estimate: still vouching, not lengthened, and a later Extend renews it on
// every node.
func testExtendCancelledMidFlight(t *testing.T, e *env) {
	key := keyOf(t)
	ps, cs := e.proxied(t)
	g := newGroup(t, cs, redlock.WithNodeTimeout(time.Second))
	l, err := g.TryAcquire(ctx(t), key, 10*time.Second)
	require.NoError(t, err)
	before := l.Deadline()
	for _, p := range ps {
		require.NoError(t, p.AddLatency(300*time.Millisecond))
	}
	short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	ok, err := l.Extend(short)
	cancel()
	require.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrUncertain, "a cancelled Extend is uncertain")
	require.NoError(t, l.Err(), "the lock still vouches: an uncertain Extend does not end it")
	require.False(t, l.Deadline().After(before), "the estimate is not lengthened")
	for _, p := range ps {
		require.NoError(t, p.Reset())
	}
	e.waitServing(t)
	require.Eventually(t, func() bool {
		ok, err = l.Extend(ctx(t))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "Extend again once the nodes answer: %v", err)
	require.True(t, ok)
	require.True(t, l.Deadline().After(before), "renewed")
	e.requireHeldOn(t, key, 0, 1, 2, 3, 4)
	outcome, err := l.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, redlock.Released, outcome)
	e.requireAbsent(t, key)
}

// testPrefixEveryNode: WithKeyPrefix (and the fence key's prefix) is applied on every node: each holds
// the token and the counter under the prefix, none at the unprefixed keys.
func testPrefixEveryNode(t *testing.T, e *env) {
	const prefix = "rlpfx:"
	key := keyOf(t)
	fence := key + ":fence"
	g := e.group(t, redlock.WithKeyPrefix(prefix), redlock.WithFencing(fence))
	l, err := g.TryAcquire(ctx(t), key, 10*time.Second)
	require.NoError(t, err)
	e.requireHeldOn(t, prefix+key, 0, 1, 2, 3, 4)
	for i := range nodeCount {
		require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], key), "node %d: nothing at the unprefixed key", i)
		require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], fence), "node %d: nothing at the unprefixed fence key", i)
		require.Positive(t, e.counter(t, i, prefix+fence), "node %d: the prefixed fence counter", i)
	}
	outcome, err := l.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, redlock.Released, outcome)
	e.requireAbsent(t, prefix+key)
}

// testBinaryKeysEveryNode: a key and a prefix with NUL, CR LF and 0xff bytes reach every node byte for
// byte; a contender on the same bytes is refused, one on a key differing only after the NUL is not.
func testBinaryKeysEveryNode(t *testing.T, e *env) {
	const prefix = "rl\x00bin\xff:"
	key := "k\x00\r\n\xfe"
	g := e.group(t, redlock.WithKeyPrefix(prefix))
	l, err := g.TryAcquire(ctx(t), key, 10*time.Second)
	require.NoError(t, err)
	e.requireHeldOn(t, prefix+key, 0, 1, 2, 3, 4)
	for i := range nodeCount {
		require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], "rl"), "node %d: the key is not cut at the NUL", i)
	}
	_, err = g.TryAcquire(ctx(t), key, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrHeld)
	other, err := g.TryAcquire(ctx(t), "k\x00\r\n\xfd", 10*time.Second)
	require.NoError(t, err, "a key differing in its last byte is another lock")
	for _, lk := range []*redlock.Lease{l, other} {
		outcome, err := lk.Release(ctx(t))
		require.NoError(t, err)
		require.Equal(t, redlock.Released, outcome)
	}
	e.requireAbsent(t, prefix+key)
}

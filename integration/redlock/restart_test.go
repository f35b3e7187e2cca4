package redlock_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/redlock"
)

// Restart scenarios: fencing tokens that survive lost nodes whatever subset granted the
// previous holder, the restart quarantine, and the cleanup warning. Fencing scenarios run with the
// quarantine off (newGroup's default here), so that what they show holds without it: the quarantine
// lasts one TTL, a fence counter must survive for ever.

// 19: a holder granted on exactly a quorum, a node restarted empty, the other side of a partition,
// after a first holder on all five nodes (token t0) that is released or expires. Nodes 3 and 4 hold the key for another owner, so A is granted on exactly a quorum (0-2):
// fewer than the fenced quorum, so A is not acquired, no token is sent and A's keys are deleted (the
// other owner's are untouched). Node 2 restarts empty, the other owner's lock ends, and B, cut off from
// nodes 0 and 1, is granted on 2-4 only: not acquired either. Once B reaches every node its token
// exceeds t0. Then the closest sequence the fenced quorum allows: A granted on exactly four nodes
// (0-3), released or expired, node 2 restarted empty, B cut off from node 0 and granted on 1-4: its
// token exceeds A's. Every issued token is strictly greater than the one before.
func testFencedExactQuorum(t *testing.T, e *env) {
	for _, ending := range []string{"released", "expired"} {
		t.Run(ending, func(t *testing.T) {
			key := fmt.Sprintf("rl:exact:%s", ending)
			fence := key + ":fence"
			keys := []string{key, fence}
			g := e.group(t, redlock.WithNodeTimeout(fastTimeout), redlock.WithFencing(fence))
			var tokens []int64
			issued := func(l *redlock.Lease) {
				t.Helper()
				if n := len(tokens); n > 0 {
					require.Greater(t, l.FencingToken(), tokens[n-1], "tokens must strictly increase (issued so far: %v)", tokens)
				}
				tokens = append(tokens, l.FencingToken())
			}
			ttl := 5 * time.Second
			if ending == "expired" {
				ttl = 800 * time.Millisecond // room for a step that waits out a paused node (fastTimeout)
			}
			end := func(l *redlock.Lease) {
				t.Helper()
				if ending == "released" {
					outcome, err := l.Release(ctx(t))
					require.NoError(t, err)
					require.Equal(t, redlock.Released, outcome)
					return
				}
				e.waitExpired(t, key)
			}

			p, err := g.TryAcquire(ctx(t), key, ttl)
			require.NoError(t, err)
			issued(p)
			end(p)

			other := e.foreign(t, key, 3, 4)
			a, err := g.TryAcquire(ctx(t), key, ttl)
			require.Nil(t, a, "granted on exactly a quorum: not enough nodes to store the token")
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			qe := e.requireQuorumError(t, err, "fence", 3, 3, 4)
			for _, n := range qe.Nodes {
				require.ErrorIs(t, n.Err, redlock.ErrHeld)
			}
			for i := range 3 {
				require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], key), "node %d: A's key cleaned up", i)
				require.Equal(t, tokens[0], e.counter(t, i, fence), "node %d: no token was sent", i)
			}
			for _, i := range []int{3, 4} {
				v, _ := e.get(t, i, key)
				require.Equal(t, other, v, "node %d: the other owner's lock is untouched", i)
			}

			e.restart(t, keys, 2)
			e.del(t, key, 3, 4)
			resume := e.pause(t, 0, 1) // B's side of the partition: nodes 2-4
			b, err := g.TryAcquire(ctx(t), key, ttl)
			require.Nil(t, b, "three reachable nodes are fewer than the fenced quorum")
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			e.requireQuorumError(t, err, "fence", 3, 0, 1)
			resume()
			for i := range nodeCount {
				require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], key), "node %d: B's key cleaned up (on 0 and 1 behind the late SET)", i)
			}
			b, err = g.TryAcquire(ctx(t), key, ttl)
			require.NoError(t, err, "healed")
			issued(b)
			end(b)

			// A on exactly the fenced quorum.
			e.foreign(t, key, 4)
			a, err = g.TryAcquire(ctx(t), key, ttl)
			require.NoError(t, err)
			e.requireHeldOn(t, key, 0, 1, 2, 3)
			issued(a)
			e.del(t, key, 4) // the other owner's lock ends
			end(a)
			e.restart(t, keys, 2)
			resume = e.pause(t, 0)
			b, err = g.TryAcquire(ctx(t), key, ttl)
			require.NoError(t, err, "granted on 1-4")
			issued(b)
			resume()
			end(b)
			t.Logf("%s: tokens %v", ending, tokens)
			e.waitExpired(t, key) // released: already absent; expired: the late SET on node 0 expires too
			e.del(t, fence, 0, 1, 2, 3, 4)
		})
	}
}

// 20: for every position p of the first holder's restarted node: A is granted on exactly the fenced
// quorum (node p+1 held by another owner), releases, then nodes p and p+3 (both of A's) restart empty
// (f = 2 losses), and B, cut off from node p+2, is granted on p, p+1, p+3 and p+4. Only node p+4 of
// B's set still has A's token, and it suffices: B's token is greater.
func testFencedEachPosition(t *testing.T, e *env) {
	key := keyOf(t)
	fence := key + ":fence"
	keys := []string{key, fence}
	g := e.group(t, redlock.WithNodeTimeout(fastTimeout), redlock.WithFencing(fence))
	for p := range nodeCount {
		x, y, z := (p+1)%nodeCount, (p+2)%nodeCount, (p+3)%nodeCount
		e.foreign(t, key, x)
		a, err := g.TryAcquire(ctx(t), key, 5*time.Second)
		require.NoError(t, err, "position %d", p)
		tA := a.FencingToken()
		outcome, err := a.Release(ctx(t))
		require.NoError(t, err)
		require.Equal(t, redlock.Released, outcome)
		e.del(t, key, x)

		e.restart(t, keys, p, z)
		resume := e.pause(t, y)
		b, err := g.TryAcquire(ctx(t), key, 5*time.Second)
		require.NoError(t, err, "position %d", p)
		require.Greater(t, b.FencingToken(), tA, "position %d: nodes %d and %d lost the token, node %d kept it", p, p, z, (p+4)%nodeCount)
		resume()
		require.NoError(t, b.Close())
		e.requireAbsent(t, key)
	}
	e.del(t, fence, 0, 1, 2, 3, 4)
}

// 21: the restart quarantine, on by default. A holds the lock on nodes 0-2; node 2 restarts empty and
// forgets it. B (another group, as in another process) is granted on 2-4, a majority, but node 2
// does not count: not acquired, node 2 named as quarantined, B's keys deleted, A's untouched, and the
// quarantine logged once with the node's address (not the key). The same holds whichever node
// restarts. With the quarantine off, the same situation hands B the lock (the documented hazard).
// The quarantine lifts once the node has been up for the longest TTL the group requested: B, retrying
// while another owner holds nodes 0 and 1, succeeds only then, on 2-4, and node 2's server reports at
// least that uptime. WithLongestTTL lengthens the quarantine beyond the group's own TTLs.
func testQuarantine(t *testing.T, e *env) {
	key := keyOf(t)
	keys := []string{key}
	const ttl = 3 * time.Second
	e.waitUptime(t, 4) // nodes restarted by earlier scenarios: older than ttl plus the 1s slack
	var logs syncBuffer
	on := []redlock.Option{redlock.WithRestartQuarantine(true), redlock.WithNodeTimeout(time.Second)}
	gA := e.group(t, redlock.WithNodeTimeout(time.Second)) // A's own quarantine does not matter here
	gB := e.group(t, append(on, redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...)

	for p := range nodeCount {
		h1, h2 := (p+3)%nodeCount, (p+4)%nodeCount // A's other two nodes
		free := []int{(p + 1) % nodeCount, (p + 2) % nodeCount}
		e.foreign(t, key, free...)
		a, err := gA.TryAcquire(ctx(t), key, ttl)
		require.NoError(t, err, "position %d", p)
		e.del(t, key, free...)
		tokenA := e.requireHeldOn(t, key, p, h1, h2)

		e.restart(t, keys, p)
		b, err := gB.TryAcquire(ctx(t), key, ttl)
		require.Nil(t, b, "position %d: the restarted node must not complete a second majority", p)
		qe := requireQuarantined(t, err, p)
		for _, n := range qe.Nodes {
			if n.Index == h1 || n.Index == h2 {
				require.ErrorIs(t, n.Err, redlock.ErrHeld)
			}
		}
		for _, i := range append(free, p) {
			require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], key), "position %d: node %d: B's key deleted", p, i)
		}
		for _, i := range []int{h1, h2} {
			v, _ := e.get(t, i, key)
			require.Equal(t, tokenA, v, "position %d: node %d: A's lock untouched", p, i)
		}
		require.NoError(t, a.Close())
		e.requireAbsent(t, key)
	}
	warn := logs.String()
	for p := range nodeCount {
		require.Equal(t, 1, strings.Count(warn, "addr="+e.servers[p].Addr), "node %d: one warning per restart; log: %s", p, warn)
	}
	require.NotContains(t, warn, key)

	// Off: the same situation hands B a second majority while A still holds (the documented hazard).
	gOff := e.group(t, redlock.WithNodeTimeout(time.Second)) // newGroup turns it off
	e.foreign(t, key, 3, 4)
	a, err := gOff.TryAcquire(ctx(t), key, ttl)
	require.NoError(t, err)
	e.del(t, key, 3, 4)
	e.restart(t, keys, 2)
	b, err := gOff.TryAcquire(ctx(t), key, ttl)
	require.NoError(t, err, "without the quarantine the restarted node completes a second majority")
	e.requireHeldOn(t, key, 2, 3, 4)
	require.NoError(t, b.Close())
	require.NoError(t, a.Close())
	e.requireAbsent(t, key)

	// The quarantine lifts: node 2 (just restarted) counts again once up for the TTL; until then B is
	// refused with node 2 quarantined while another owner holds nodes 0 and 1.
	e.restart(t, keys, 2)
	other := e.foreign(t, key, 0, 1)
	refusals := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err = gB.TryAcquire(ctx(t), key, ttl)
		if err == nil {
			break
		}
		requireQuarantined(t, err, 2)
		refusals++
		require.True(t, time.Now().Before(deadline), "the quarantine never lifted: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	require.Positive(t, refusals, "blocked while node 2 was young")
	require.GreaterOrEqual(t, e.uptime(t, 2), int64(ttl/time.Second), "lifted only once node 2 was up for the TTL")
	tokenB := e.requireHeldOn(t, key, 2, 3, 4)
	require.NotEqual(t, other, tokenB)
	t.Logf("quarantine lifted after %d refused attempts; node 2 uptime %ds", refusals, e.uptime(t, 2))
	require.NoError(t, b.Close())
	e.del(t, key, 0, 1)
	e.requireAbsent(t, key)

	// WithLongestTTL raises the quarantine above the group's own TTLs: with an hour, no node of these
	// servers (up for seconds) counts.
	gLong := e.group(t, append(on, redlock.WithLongestTTL(time.Hour))...)
	_, err = gLong.TryAcquire(ctx(t), key, ttl)
	qe := e.requireQuorumError(t, err, "acquire", 0, 0, 1, 2, 3, 4)
	for _, n := range qe.Nodes {
		require.ErrorIs(t, n.Err, redlock.ErrQuarantined, "node %d", n.Index)
	}
	e.requireAbsent(t, key)
}

// requireQuarantined asserts that err is a failed acquisition's *QuorumError in which node i granted
// but was not counted (ErrQuarantined), and returns it. Nodes restarted a few seconds earlier may be
// in quarantine too; which others count is not asserted.
func requireQuarantined(t *testing.T, err error, i int) *redlock.QuorumError {
	t.Helper()
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.Equal(t, "acquire", qe.Op)
	require.Less(t, qe.Got, qe.Needed)
	for _, n := range qe.Nodes {
		if n.Index == i {
			require.ErrorIs(t, n.Err, redlock.ErrQuarantined, "node %d", i)
			return qe
		}
	}
	t.Fatalf("node %d not reported: %v", i, err)
	return nil
}

// 22: the cleanup after a failed attempt warns only about nodes that may hold the attempt's token.
// Nodes 2-4 hold a hash at the lock key: they refuse the lock (SET NX) and the cleanup's owner check
// fails there with WRONGTYPE, but they never got the token, so nothing is logged. Nodes 0 and 1 are
// cleaned up; the hashes are untouched.
func testCleanupWarning(t *testing.T, e *env) {
	key := keyOf(t)
	var logs bytes.Buffer
	g := e.group(t, redlock.WithNodeTimeout(fastTimeout), redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, e.raw[i].Do(ctx(t), e.raw[i].B().Hset().Key(key).FieldValue().FieldValue("f", "v").Build()).Error())
	}
	_, err := g.TryAcquire(ctx(t), key, 5*time.Second)
	qe := e.requireQuorumError(t, err, "acquire", 2, 2, 3, 4)
	for _, n := range qe.Nodes {
		require.ErrorIs(t, n.Err, redlock.ErrHeld)
	}
	require.Empty(t, logs.String(), "no node that never got the token is reported as keeping it")
	for i := range 2 {
		require.EqualValues(t, -2, matrix.PTTL(t, e.raw[i], key), "node %d cleaned up", i)
	}
	for _, i := range []int{2, 3, 4} {
		typ, err := e.raw[i].Do(ctx(t), e.raw[i].B().Type().Key(key).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, "hash", typ, "node %d: the hash is untouched", i)
	}
	e.del(t, key, 2, 3, 4)
}

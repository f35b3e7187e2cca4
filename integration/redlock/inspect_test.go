package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/redlock"
)

// testInspect: Group.Inspect reads every node (one row each, in node order) and the quorum's view,
// writing nothing: absent; held by one owner everywhere (remaining life and the fencing token);
// held on a minority only (rows say so, the quorum does not); a node holding another type (its row
// fails with ErrForeignData, the others still answer); fewer than a quorum answering (a QuorumError
// of Op "inspect").
func testInspect(t *testing.T, e *env) {
	key := keyOf(t)
	fence := key + ":fence"
	g := e.group(t, redlock.WithNodeTimeout(fastTimeout), redlock.WithFencing(fence))

	in, err := g.Inspect(ctx(t), key)
	require.NoError(t, err)
	require.False(t, in.Exists)
	require.Zero(t, in.FencingToken)
	require.Len(t, in.Nodes, nodeCount)
	for i, n := range in.Nodes {
		require.Equal(t, i, n.Index)
		require.Equal(t, e.servers[i].Addr, n.Addr)
		require.False(t, n.Exists)
		require.NoError(t, n.Err)
	}

	l, err := g.TryAcquire(ctx(t), key, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	token := e.requireHeldOn(t, key, 0, 1, 2, 3, 4)
	in, err = g.Inspect(ctx(t), key)
	require.NoError(t, err)
	require.True(t, in.Exists)
	require.False(t, in.NoExpiry)
	require.Greater(t, in.Remaining, 9*time.Second)
	require.LessOrEqual(t, in.Remaining, 10*time.Second)
	require.Equal(t, l.FencingToken(), in.FencingToken)
	for i, n := range in.Nodes {
		require.True(t, n.Exists, "node %d", i)
		require.Greater(t, n.Remaining, 9*time.Second, "node %d", i)
		require.Equal(t, l.FencingToken(), n.FencingToken, "node %d", i)
	}
	require.Equal(t, token, e.holders(t, key)[0], "Inspect writes nothing")

	// A minority holds the token, another owner one node: every row is right, the quorum holds nothing.
	e.del(t, key, 0, 1, 2)
	other := e.foreign(t, key, 2)
	in, err = g.Inspect(ctx(t), key)
	require.NoError(t, err)
	require.False(t, in.Exists, "two nodes of one owner and one of another are no quorum")
	require.Zero(t, in.Remaining)
	for i, n := range in.Nodes {
		require.Equal(t, i >= 2, n.Exists, "node %d", i)
	}
	require.Equal(t, []string{"", "", other, token, token}, e.holders(t, key))

	// Back to a quorum of the token, and node 4 holding another type: its row fails, the rest answer.
	e.set(t, 0, key, token)
	e.set(t, 1, key, token)
	e.del(t, key, 4)
	require.NoError(t, e.raw[4].Do(ctx(t), e.raw[4].B().Hset().Key(key).FieldValue().FieldValue("f", "v").Build()).Error())
	in, err = g.Inspect(ctx(t), key)
	require.NoError(t, err)
	require.ErrorIs(t, in.Nodes[4].Err, redlock.ErrForeignData)
	require.False(t, in.Nodes[4].Exists)
	require.True(t, in.Exists, "nodes 0, 1 and 3 hold one owner's token")
	require.True(t, in.Nodes[0].NoExpiry, "re-planted without expiry")
	require.False(t, in.NoExpiry, "the quorum's view ends with node 3's expiry")
	require.Greater(t, in.Remaining, time.Duration(0))
	require.LessOrEqual(t, in.Remaining, in.Nodes[3].Remaining)
	e.del(t, key, 4)

	// Fewer than a quorum answer: no view.
	resume := e.pause(t, 0, 2, 4)
	_, err = g.Inspect(ctx(t), key)
	e.requireQuorumError(t, err, "inspect", 2, 0, 2, 4)
	resume()
	e.del(t, key, 0, 1, 2, 3, 4)
}

package partitions_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/testkit"
)

// TestClusterPrimaryPartitioned: a Valkey 9 container Cluster (3 primaries, one replica each) on its
// private network. The primary of a key's slot is partitioned from its replica and the rest of the
// cluster (and from this test); the replica is elected in its place and the cluster serves every slot
// again; a write acknowledged before the partition and replicated survives; once the partition
// heals the old primary rejoins as a replica of the new one.
func TestClusterPrimaryPartitioned(t *testing.T) {
	needContainers(t)
	c := testkit.StartCluster(t, testkit.Valkey9, testkit.WithReplicas(1), testkit.WithNodeTimeout(1500*time.Millisecond), testkit.WithStartTimeout(90*time.Second))
	require.NotNil(t, c.Network, "a container cluster has its own network")
	t.Logf("cluster: %s on %s", c, c.Network.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const key = "partitioned-key"
	// A short dial timeout: the client's topology refresh dials the partitioned node from a detached
	// goroutine, which must end soon after Close (goleak), not after the default 3s.
	cc := c.Client(t, func(o *rueidis.ClientOption) { o.Dialer.Timeout = 500 * time.Millisecond })
	require.NoError(t, cc.Do(ctx, cc.B().Set().Key(key).Value("v1").Build()).Error())
	old, err := c.PrimaryOf(ctx, testkit.KeySlot(key))
	require.NoError(t, err)
	// WAIT on the key's primary itself (a cluster client sends a keyless WAIT to any node, replicas too).
	msg, err := old.Do(ctx, "WAIT", "1", "5000")
	require.NoError(t, err)
	n, err := msg.AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the write reached the replica")
	old.MustDisconnect(t, c.Network)
	require.NoError(t, c.WaitFailover(ctx))
	promoted, err := c.PrimaryOf(ctx, testkit.KeySlot(key))
	require.NoError(t, err)
	assert.NotSame(t, old, promoted, "the replica took over the partitioned primary's slots")

	require.Eventually(t, func() bool {
		c2, cancel2 := context.WithTimeout(ctx, time.Second)
		defer cancel2()
		return cc.Do(c2, cc.B().Set().Key(key).Value("v2").Build()).Error() == nil
	}, 30*time.Second, 50*time.Millisecond, "the client writes to the new primary")
	msg, err = promoted.Do(ctx, "GET", key)
	require.NoError(t, err)
	v, _ := msg.ToString()
	assert.Equal(t, "v2", v)

	old.MustReconnect(t, c.Network)
	require.Eventually(t, func() bool {
		info, err := testkit.ReplicationOffsets(ctx, old)
		return err == nil && info.Role == "slave"
	}, 30*time.Second, 100*time.Millisecond, "the old primary rejoins as a replica")
}

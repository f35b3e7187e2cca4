package testkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeySlot(t *testing.T) {
	t.Parallel()
	// Values from the Redis Cluster specification / CLUSTER KEYSLOT.
	assert.Equal(t, 12739, KeySlot("123456789"))
	assert.Equal(t, 12182, KeySlot("foo"))
	assert.Equal(t, KeySlot("user1000"), KeySlot("{user1000}.following"))
	assert.Equal(t, KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}")) // empty tag: whole key
	assert.Equal(t, KeySlot("bar"), KeySlot("foo{bar}{zap}"))
}

func TestClusterKillPrimaryFailover(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		c := StartCluster(t, target, WithReplicas(1), WithNodeTimeout(1500*time.Millisecond))
		require.Len(t, c.Nodes, 6)
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		for _, r := range c.Nodes[3:] {
			info, err := ReplicationOffsets(ctx, r)
			require.NoError(t, err)
			assert.Equal(t, "slave", info.Role, r.Addr)
		}
		const key = "failover-key"
		slot := KeySlot(key)
		msg, err := c.Nodes[0].Do(ctx, "CLUSTER", "KEYSLOT", key)
		require.NoError(t, err)
		n, _ := msg.AsInt64()
		require.EqualValues(t, slot, n, "KeySlot disagrees with the server")

		cc := c.Client(t)
		require.NoError(t, cc.Do(ctx, cc.B().Set().Key(key).Value("v1").Build()).Error())

		start := time.Now()
		killed, err := c.KillPrimary(ctx, slot)
		require.NoError(t, err)
		require.NoError(t, c.WaitFailover(ctx))
		t.Logf("%s: failover of %s took %v", target, killed.Addr, time.Since(start).Round(time.Millisecond))
		promoted, err := c.PrimaryOf(ctx, slot)
		require.NoError(t, err)
		assert.NotSame(t, killed, promoted)
		if promoted.Backend == BackendProcess {
			assert.Positive(t, promoted.PID())
		}

		// The client made before the failover writes to the failed slot range once it has
		// refreshed its topology.
		require.Eventually(t, func() bool {
			c2, cancel2 := context.WithTimeout(ctx, time.Second)
			defer cancel2()
			return cc.Do(c2, cc.B().Set().Key(key).Value("v2").Build()).Error() == nil
		}, 15*time.Second, 100*time.Millisecond)
		fresh := c.Client(t)
		v, err := fresh.Do(ctx, fresh.B().Get().Key(key).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "v2", v)
	})
}

func TestClusterMigrationAskMoved(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		c := StartCluster(t, target)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const moved, stays = "{mig}a", "{mig}b"
		slot := KeySlot(moved)
		cc := c.Client(t)
		require.NoError(t, cc.Do(ctx, cc.B().Set().Key(moved).Value("va").Build()).Error())
		require.NoError(t, cc.Do(ctx, cc.B().Set().Key(stays).Value("vb").Build()).Error())

		from, err := c.PrimaryOf(ctx, slot)
		require.NoError(t, err)
		to := c.Nodes[(c.nodeIndex(from)+1)%3]
		m, err := c.BeginMigration(ctx, slot, to, MigrateOptions{})
		require.NoError(t, err)
		require.NoError(t, m.MoveKeys(ctx, moved))
		require.Error(t, m.MoveKeys(ctx, "not-in-the-slot"))

		// A raw connection to the source is redirected with ASK for the migrated key ...
		_, err = from.Do(ctx, "GET", moved)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("ASK %d %s", slot, to.Addr))
		var re *rueidis.RedisError
		require.ErrorAs(t, err, &re)
		_, ask := re.IsAsk()
		assert.True(t, ask)
		// ... still serves the key it holds, and the destination wants ASKING.
		v, ok := getString(ctx, t, from, stays)
		assert.True(t, ok)
		assert.Equal(t, "vb", v)
		_, err = to.Do(ctx, "GET", moved)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "MOVED")

		// The cluster client follows ASK.
		got, err := cc.Do(ctx, cc.B().Get().Key(moved).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "va", got)
		got, err = cc.Do(ctx, cc.B().Get().Key(stays).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "vb", got)

		require.NoError(t, m.Finish(ctx))
		_, err = from.Do(ctx, "GET", moved)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("MOVED %d %s", slot, to.Addr))
		owner, err := c.PrimaryOf(ctx, slot)
		require.NoError(t, err)
		assert.Same(t, to, owner)

		// The cluster client follows MOVED transparently.
		for _, k := range []string{moved, stays} {
			got, err := cc.Do(ctx, cc.B().Get().Key(k).Build()).ToString()
			require.NoError(t, err, k)
			assert.NotEmpty(t, got)
		}
		require.NoError(t, cc.Do(ctx, cc.B().Set().Key(stays).Value("vb2").Build()).Error())
		v, ok = getString(ctx, t, to, stays)
		assert.True(t, ok)
		assert.Equal(t, "vb2", v)

		// And back in one call.
		require.NoError(t, c.MigrateSlot(ctx, slot, from, MigrateOptions{Batch: 1}))
		v, ok = getString(ctx, t, from, stays)
		assert.True(t, ok)
		assert.Equal(t, "vb2", v)
		_, err = c.BeginMigration(ctx, slot, from, MigrateOptions{})
		assert.Error(t, err, "from already serves the slot")
	})
}

package partitions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/testkit"
)

// TestRedlockPartitions: five Redis 8 containers on one private network, each a Redlock node. With
// two nodes (a minority) partitioned away the lock is granted by the other three; with three (a
// majority) away no lock is granted and nothing is left on the reachable two; a held lock whose
// majority is partitioned away cannot be renewed and ends, never confirmed; after the partition heals
// the lock is granted on all five again.
func TestRedlockPartitions(t *testing.T) {
	needContainers(t)
	nw := testkit.NewNetwork(t)
	srv := make([]*testkit.Server, 5)
	clients := make([]rueidis.Client, 5)
	for i := range srv {
		srv[i] = testkit.Start(t, testkit.Redis8, testkit.WithNetwork(nw), testkit.WithStartTimeout(60*time.Second))
		clients[i] = srv[i].Client(t)
	}
	t.Logf("redlock nodes: redis %s on %s", srv[0].Version, nw.Name)
	g, err := redlock.NewGroup(clients, redlock.WithNodeTimeout(300*time.Millisecond), redlock.WithRestartQuarantine(false))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holds := func(key string) (n int) {
		for _, s := range srv {
			if addr := s.AddrOn(nw); addr != "" {
				if v, err := rawGet(ctx, s, key); err == nil && v != "" {
					n++
				}
			}
		}
		return n
	}
	partition := func(idx ...int) func() {
		for _, i := range idx {
			srv[i].MustDisconnect(t, nw)
		}
		return func() {
			for _, i := range idx {
				srv[i].MustReconnect(t, nw)
			}
		}
	}

	t.Run("minority_partitioned", func(t *testing.T) {
		heal := partition(0, 1)
		l, err := g.TryAcquire(ctx, "{p}:minority", 5*time.Second)
		require.NoError(t, err, "three of five nodes are a quorum")
		out, err := l.Release(ctx)
		require.NoError(t, err)
		assert.Equal(t, ownership.Released, out)
		heal()
	})

	t.Run("majority_partitioned", func(t *testing.T) {
		heal := partition(0, 1, 2)
		_, err := g.TryAcquire(ctx, "{p}:majority", 5*time.Second)
		require.ErrorIs(t, err, redlock.ErrNotAcquired, "two of five nodes are no quorum")
		for _, i := range []int{3, 4} {
			v, err := rawGet(ctx, srv[i], "{p}:majority")
			require.NoError(t, err)
			assert.Empty(t, v, "node %d: the failed attempt is cleaned up", i)
		}
		heal()
	})

	t.Run("held_lock_loses_its_majority", func(t *testing.T) {
		l, err := g.TryAcquire(ctx, "{p}:held", 2*time.Second)
		require.NoError(t, err)
		heal := partition(2, 3, 4)
		_, err = l.Extend(ctx)
		require.Error(t, err, "a renewal cannot be confirmed by two of five nodes")
		assert.True(t, errors.Is(err, luakit.ErrUncertain) || errors.Is(err, luakit.ErrLost), "uncertain or lost, never renewed: %v", err)
		select {
		case <-l.Done():
		case <-ctx.Done():
			t.Fatal("the lock's estimate never ended")
		}
		require.Error(t, l.Err(), "the lock ends at its local estimate without a confirmed renewal")
		heal()
		_, _ = l.Release(ctx)
	})

	t.Run("healed", func(t *testing.T) {
		for _, c := range clients { // connections through a partition are broken: wait until each serves
			require.Eventually(t, func() bool {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				return c.Do(cctx, c.B().Ping().Build()).Error() == nil
			}, 30*time.Second, 50*time.Millisecond)
		}
		l, err := g.TryAcquire(ctx, "{p}:healed", 5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, 5, holds("{p}:healed"), "granted on every node again")
		_, err = l.Release(ctx)
		require.NoError(t, err)
	})
}

// rawGet reads key on s with a fresh admin command (its address on the network).
func rawGet(ctx context.Context, s *testkit.Server, key string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msg, err := s.Do(cctx, "GET", key)
	if rueidis.IsRedisNil(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return msg.ToString()
}

package replicaack_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/testkit"
)

// TestReplicaAckRedlock: redlock over five nodes that are each a primary with one replica, fenced,
// with the acknowledgement on (the restart quarantine off: the nodes were just started). With one
// node's replication held, four nodes (the fenced quorum) still acknowledge: granted. With two held,
// the acquisition fails with a QuorumError whose held nodes match ErrNotAcknowledged, and nothing
// stays held: a group without the acknowledgement acquires at once.
func TestReplicaAckRedlock(t *testing.T) {
	standalone := matrix.Select(matrix.Targets(), func(mt matrix.Target) bool {
		return !mt.Cluster && !mt.Sentinel && (mt.Server == testkit.Redis8 || mt.Server == testkit.Valkey9)
	})
	matrix.Run(t, standalone, func(t *testing.T, mt matrix.Target) {
		var nodes [5]*testkit.Replicated
		clients := make([]rueidis.Client, len(nodes))
		for i := range nodes {
			nodes[i] = testkit.StartReplicated(t, mt.Server)
			c, err := rueidis.NewClient(nodes[i].Primary.ClientOption())
			require.NoError(t, err)
			t.Cleanup(c.Close)
			clients[i] = c
		}
		acked, err := redlock.NewGroup(clients, redlock.WithFencing("ack:fence"), redlock.WithRestartQuarantine(false), redlock.WithReplicaAck(ack))
		require.NoError(t, err)
		plain, err := redlock.NewGroup(clients, redlock.WithFencing("ack:fence"), redlock.WithRestartQuarantine(false))
		require.NoError(t, err)
		const key = "ack:redlock"

		require.NoError(t, nodes[0].HoldReplication())
		l, err := acked.TryAcquire(ctx(t), key, 10*time.Second)
		require.NoError(t, err, "four of five nodes acknowledge: the fenced quorum")
		_, err = l.Release(ctx(t))
		require.NoError(t, err)

		require.NoError(t, nodes[1].HoldReplication())
		_, err = acked.TryAcquire(ctx(t), key, 10*time.Second)
		var qe *redlock.QuorumError
		require.True(t, errors.As(err, &qe), "%v", err)
		assert.Equal(t, "fence", qe.Op, "three acknowledged grants are a quorum, not the fenced quorum of four")
		notAcked := 0
		for _, n := range qe.Nodes {
			if errors.Is(n.Err, luakit.ErrNotAcknowledged) {
				notAcked++
			}
		}
		assert.Equal(t, 2, notAcked, "the two held nodes: %v", qe.Nodes)

		l, err = plain.TryAcquire(ctx(t), key, 10*time.Second)
		require.NoError(t, err, "the unacknowledged grants were given back")
		_, err = l.Release(ctx(t))
		require.NoError(t, err)
	})
}

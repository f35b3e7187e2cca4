package replicaack_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// TestReplicaAckAOF: the acknowledgement of the primary's own fsync (AOF, WAITAOF 1 0) on each
// standalone server. Redis 7.0 has no WAITAOF: the acquisition is refused before it writes
// (luakit.ErrUnsupported; neither the lease nor the fence counter exists). The others refuse WAITAOF
// while appendonly is off: the acquisition fails with ErrNotAcknowledged after its cleanup (the
// lease is gone; the counter keeps its increment). (A grant with appendonly on is not asserted: how
// soon the primary's background fsync completes depends on the machine's disk.)
func TestReplicaAckAOF(t *testing.T) {
	standalone := matrix.Select(matrix.Targets(), func(mt matrix.Target) bool { return !mt.Cluster && !mt.Sentinel })
	matrix.Run(t, standalone, func(t *testing.T, mt matrix.Target) {
		e := matrix.StartEnv(t, mt)
		lk, err := lock.New(e.Raw, lock.WithReplicaAck(luakit.ReplicaAck{AOF: true, Timeout: time.Second}))
		require.NoError(t, err)
		const name = "ack:aof"
		lease, fence := lock.Keys(name)
		exists := func(k string) bool {
			n, err := e.Raw.Do(ctx(t), e.Raw.B().Exists().Key(k).Build()).AsInt64()
			require.NoError(t, err)
			return n == 1
		}
		_, err = e.Srv.Do(ctx(t), "CONFIG", "SET", "appendonly", "no")
		require.NoError(t, err)
		_, err = lk.TryAcquire(ctx(t), name, 10*time.Second)
		if mt.Server == testkit.Redis70 {
			require.ErrorIs(t, err, luakit.ErrUnsupported)
			assert.False(t, exists(fence), "refused before any write")
			assert.False(t, exists(lease))
			return
		}
		require.ErrorIs(t, err, luakit.ErrNotAcknowledged)
		assert.Contains(t, err.Error(), "appendonly")
		assert.False(t, exists(lease), "the unacknowledged lease was cleaned up")
	})
}

package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func getString(ctx context.Context, t *testing.T, s *Server, key string) (string, bool) {
	t.Helper()
	msg, err := s.Do(ctx, "GET", key)
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	require.NoError(t, err)
	v, err := msg.ToString()
	require.NoError(t, err)
	return v, true
}

// The failover helper loses a write the replica never received (issue 3, "Done when").
func TestReplicatedFailoverLosesUnreplicatedWrite(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		r := StartReplicated(t, target)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		p, err := ReplicationOffsets(ctx, r.Primary)
		require.NoError(t, err)
		assert.Equal(t, "master", p.Role)
		assert.Equal(t, 1, p.ConnectedSlaves)
		q, err := ReplicationOffsets(ctx, r.Replica)
		require.NoError(t, err)
		assert.Equal(t, "slave", q.Role)
		assert.Equal(t, "up", q.MasterLinkStatus)

		_, err = r.Primary.Do(ctx, "SET", "before", "1")
		require.NoError(t, err)
		require.NoError(t, r.WaitSync(ctx))
		v, ok := getString(ctx, t, r.Replica, "before")
		require.True(t, ok, "synced write missing on the replica")
		assert.Equal(t, "1", v)

		require.NoError(t, r.HoldReplication())
		_, err = r.Primary.Do(ctx, "SET", "after", "2")
		require.NoError(t, err)
		// The replica cannot catch up while the stream is held.
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		err = r.WaitSync(short)
		cancelShort()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		p, err = ReplicationOffsets(ctx, r.Primary)
		require.NoError(t, err)
		q, err = ReplicationOffsets(ctx, r.Replica)
		require.NoError(t, err)
		assert.Less(t, q.SlaveReplOffset, p.MasterReplOffset)

		old := r.Primary
		require.NoError(t, r.Failover(ctx, FailoverOptions{OldPrimary: PauseOldPrimary}))
		assert.Same(t, old, r.OldPrimary)
		assert.Nil(t, r.Replica)
		require.Error(t, r.WaitSync(ctx))

		info, err := ReplicationOffsets(ctx, r.Primary)
		require.NoError(t, err)
		assert.Equal(t, "master", info.Role)
		v, ok = getString(ctx, t, r.Primary, "before")
		assert.True(t, ok, "the write synced before the failover is lost")
		assert.Equal(t, "1", v)
		_, ok = getString(ctx, t, r.Primary, "after")
		assert.False(t, ok, "the unreplicated write survived the failover")

		// The promoted server takes writes.
		_, err = r.Primary.Do(ctx, "SET", "promoted", "3")
		require.NoError(t, err)
	})
}

func TestReplicatedHoldRelease(t *testing.T) {
	t.Parallel()
	r := StartReplicated(t, firstAvailable(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	require.NoError(t, r.HoldReplication())
	require.NoError(t, r.HoldReplication()) // idempotent
	_, err := r.Primary.Do(ctx, "SET", "held", "x")
	require.NoError(t, err)
	_, ok := getString(ctx, t, r.Replica, "held")
	assert.False(t, ok)

	require.NoError(t, r.ReleaseReplication())
	require.NoError(t, r.WaitSync(ctx)) // the replica reconnects and catches up
	v, ok := getString(ctx, t, r.Replica, "held")
	assert.True(t, ok)
	assert.Equal(t, "x", v)

	// Failover after a sync, killing the old primary: nothing is lost.
	require.NoError(t, r.Failover(ctx, FailoverOptions{OldPrimary: KillOldPrimary}))
	assert.Zero(t, r.OldPrimary.PID())
	v, ok = getString(ctx, t, r.Primary, "held")
	assert.True(t, ok)
	assert.Equal(t, "x", v)
	require.Error(t, r.Failover(ctx, FailoverOptions{}))
}

func TestParseReplicationInfo(t *testing.T) {
	t.Parallel()
	ri, err := parseReplicationInfo("# Replication\r\nrole:slave\r\nmaster_link_status:up\r\nslave_repl_offset:42\r\nmaster_repl_offset:42\r\n")
	require.NoError(t, err)
	assert.Equal(t, "slave", ri.Role)
	assert.EqualValues(t, 42, ri.SlaveReplOffset)
	assert.Equal(t, "up", ri.MasterLinkStatus)
	_, err = parseReplicationInfo("role:master\r\nmaster_repl_offset:x\r\n")
	assert.Error(t, err)
	_, err = parseReplicationInfo("")
	assert.Error(t, err)
}

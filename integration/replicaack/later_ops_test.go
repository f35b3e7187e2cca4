package replicaack_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
)

// TestReplicaAckIdempotencyCompletion: a claim taken while replication flows, then completed and
// renewed while it is held. Extend returns (false, ErrNotAcknowledged and ErrUncertain): renewed on
// the primary, not counted. Complete returns the same: the result is stored on the primary only. Once
// replication flows, the completion is there to replay.
func TestReplicaAckIdempotencyCompletion(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		g := matrix.StartEnv(t, st).Sentinel
		c := g.Client(t, matrix.NoCache)
		s, err := idempotency.New(c, idempotency.WithReplicaAck(ack))
		require.NoError(t, err)
		const key = "ack:idem:complete"
		at, err := s.TryBegin(ctx(t), key, 10*time.Second, idempotency.Fingerprint{})
		require.NoError(t, err)
		require.Equal(t, idempotency.Started, at.State)

		require.NoError(t, g.HoldReplication())
		ok, err := s.Extend(ctx(t), key, at.OwnerToken, 10*time.Second)
		assert.False(t, ok)
		requireNotAcknowledged(t, err)
		assert.ErrorIs(t, err, idempotency.ErrUncertain)
		ok, err = s.Complete(ctx(t), key, at.OwnerToken, []byte("done"), time.Minute)
		assert.False(t, ok)
		requireNotAcknowledged(t, err)
		assert.ErrorIs(t, err, idempotency.ErrUncertain)

		require.NoError(t, g.ReleaseReplication())
		require.NoError(t, g.WaitSync(ctx(t)))
		again, err := s.TryBegin(ctx(t), key, 10*time.Second, idempotency.Fingerprint{})
		require.NoError(t, err)
		assert.Equal(t, idempotency.Completed, again.State, "the completion was stored on the primary")
		assert.Equal(t, []byte("done"), again.Result)
	})
}

// TestReplicaAckLeader: an Election with the acknowledgement campaigns while replication is held and
// wins no term (every attempt sends its WAIT and is refused: the lease key is never left behind);
// once replication flows it is elected, with a fencing token above every refused attempt's.
func TestReplicaAckLeader(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		e := matrix.StartEnv(t, st)
		g := e.Sentinel
		c := g.Client(t, matrix.NoCache)
		elected := make(chan leader.Term, 1)
		el, err := leader.New(c, "ack:leader", leader.WithReplicaAck(ack), leader.WithRetryDelay(20*time.Millisecond),
			leader.OnElected(func(ctx context.Context, term leader.Term) error {
				select {
				case elected <- term:
				default:
				}
				<-ctx.Done()
				return nil
			}))
		require.NoError(t, err)
		lease, _ := lock.Keys("ack:leader")
		waits := func() int64 {
			st, err := g.Primary.CommandStats(ctx(t))
			require.NoError(t, err)
			return st["wait"]
		}

		require.NoError(t, g.HoldReplication())
		before := waits()
		rctx, cancel := context.WithCancel(ctx(t))
		require.NoError(t, el.Start(rctx))
		defer func() {
			cancel()
			<-el.Stopped()
		}()
		require.Eventually(t, func() bool { return waits() >= before+3 }, 20*time.Second, 10*time.Millisecond,
			"the candidate campaigns while replication is held")
		_, leading := el.Current()
		assert.False(t, leading, "no term while no replica acknowledges")
		select {
		case term := <-elected:
			t.Fatalf("elected while replication is held: %+v", term)
		default:
		}

		require.NoError(t, g.ReleaseReplication())
		select {
		case term := <-elected:
			assert.Positive(t, term.FencingToken)
		case <-time.After(30 * time.Second):
			t.Fatal("not elected once replication flows")
		}
		n, err := e.Raw.Do(ctx(t), e.Raw.B().Exists().Key(lease).Build()).AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the term's lease is held")
	})
}

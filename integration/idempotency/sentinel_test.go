package idempotency_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// sentinelSkip names the scenarios that do not run on a Sentinel target, with the reason.
var sentinelSkip = map[string]string{
	"15_lost_replies":                    "puts a proxy in front of one server address: a Sentinel client finds the primary through the Sentinels, not through the proxy",
	"19_crashed_owner_frees_after_lease": "its helper process dials the target's addresses with a plain client: here they are the Sentinels",
}

// TestIdempotencyOnSentinel runs the suite's scenarios on the Sentinel targets of the matrix
// (matrix.SentinelTargets; the stores' clients are rueidis Sentinel clients).
func TestIdempotencyOnSentinel(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, sentinelSkip)
	})
}

// TestIdempotencySentinelFailover: what survives a Sentinel failover that lost writes. A key
// completed before the failover (replicated) still replays its result; a key claimed and completed
// while replication was held is absent after the failover, so its operation can be claimed and run a
// second time: the documented limit of asynchronous replication (an idempotency claim is as durable
// as the write that made it).
func TestIdempotencySentinelFailover(t *testing.T) {
	for _, st := range matrix.SentinelTargets() {
		t.Run(st.Name, func(t *testing.T) {
			e := startEnv(t, st)
			s := e.store(t)
			const kept, lost = "idem:sentinel:kept", "idem:sentinel:lost"
			a := begin(t, s, kept, time.Minute, fpA)
			requireState(t, a, idempotency.Started)
			ok, err := s.Complete(ctx(t), kept, a.OwnerToken, []byte("kept"), time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, e.Sentinel.WaitSync(ctx(t)))
			require.NoError(t, e.Sentinel.HoldReplication())
			b := begin(t, s, lost, time.Minute, fpA)
			requireState(t, b, idempotency.Started)
			ok, err = s.Complete(ctx(t), lost, b.OwnerToken, []byte("first run"), time.Minute)
			require.NoError(t, err)
			require.True(t, ok)

			_, err = e.Sentinel.Failover(ctx(t))
			require.NoError(t, err)
			var got idempotency.Attempt
			require.Eventually(t, func() bool { // the Sentinels closed the client's connections once
				got, err = s.TryBegin(ctx(t), kept, time.Minute, fpA)
				return err == nil
			}, 20*time.Second, 50*time.Millisecond)
			requireState(t, got, idempotency.Completed)
			require.Equal(t, []byte("kept"), got.Result, "a replicated result survives")
			// Until the Sentinels' switch message moves the client, it may still read the old primary,
			// which holds the lost completion (the Sentinels turn it into a replica seconds later); on
			// the new primary the key is absent. Either way a replicated result is never lost.
			var again idempotency.Attempt
			require.Eventually(t, func() bool {
				again, err = s.TryBegin(ctx(t), lost, time.Minute, fpA)
				return err == nil && again.State != idempotency.Completed
			}, 20*time.Second, 50*time.Millisecond, "the lost completion is gone from the new primary")
			requireState(t, again, idempotency.Started) // the documented limit: the operation runs again
			got = begin(t, s, kept, time.Minute, fpA)
			requireState(t, got, idempotency.Completed)
		})
	}
}

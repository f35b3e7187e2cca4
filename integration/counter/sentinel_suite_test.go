package counter_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// sentinelSkip names the scenarios that do not run on a Sentinel target, with the reason.
var sentinelSkip = map[string]string{
	"09_close_bounded_by_ctx":     "pauses the server: on Sentinel that is the primary, which the Sentinels would fail over",
	"10_disconnect_fails_fast":    "kills the server: on Sentinel that is a failover (see TestCounterSentinelFailover)",
	"16_store_created_while_down": "kills the server: on Sentinel that is a failover (see TestCounterSentinelFailover)",
}

// TestCounterOnSentinel runs the suite's scenarios on the Sentinel targets of the matrix
// (matrix.SentinelTargets; the stores' clients are rueidis Sentinel clients).
func TestCounterOnSentinel(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, sentinelSkip)
	})
}

// TestCounterSentinelFailover: what survives a Sentinel failover that lost writes. A limit of 3 is
// reached through a Sentinel client (replicated); one more increment under a limit of 4 is
// allowed while replication is held; after the failover the counter is back at 3 and the same
// increment is allowed a second time: admissions made after the last replicated write can be
// granted again (the documented limit of asynchronous replication).
func TestCounterSentinelFailover(t *testing.T) {
	for _, st := range matrix.SentinelTargets() {
		t.Run(st.Name, func(t *testing.T) {
			e := startEnv(t, st)
			s := e.store(t)
			const key = "ck:sentinel:failover"
			for want := int64(1); want <= 3; want++ {
				res, err := s.IncrementUpTo(ctx(t), key, 1, 3, 0)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				require.Equal(t, want, res.Value)
			}
			require.NoError(t, e.Sentinel.WaitSync(ctx(t)))
			require.NoError(t, e.Sentinel.HoldReplication())
			res, err := s.IncrementUpTo(ctx(t), key, 1, 4, 0)
			require.NoError(t, err)
			require.True(t, res.Allowed)
			require.EqualValues(t, 4, res.Value)

			_, err = e.Sentinel.Failover(ctx(t))
			require.NoError(t, err)
			var v int64
			// The Sentinels close the client's connections once; until their switch message moves the
			// client it may still read the old primary, which holds the lost increment (it is turned
			// into a replica of the new one seconds later).
			require.Eventually(t, func() bool {
				v, err = s.Get(ctx(t), key)
				return err == nil && v != 4
			}, 20*time.Second, 50*time.Millisecond, "the lost increment is gone from the new primary")
			require.EqualValues(t, 3, v, "the increment the replica never received is lost")
			res, err = s.IncrementUpTo(ctx(t), key, 1, 4, 0)
			require.NoError(t, err)
			require.True(t, res.Allowed, "the lost admission is granted a second time")
			require.EqualValues(t, 4, res.Value)
		})
	}
}

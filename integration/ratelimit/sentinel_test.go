package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// TestRateLimitOnSentinel runs the suite's scenarios on the Sentinel targets of the matrix
// (matrix.SentinelTargets; the limiters' clients are rueidis Sentinel clients). The standalone-only
// scenarios are skipped there with the reason: they pause or stop the server process, which on
// Sentinel is the primary, and the Sentinels would fail it over.
func TestRateLimitOnSentinel(t *testing.T) {
	matrix.Run(t, matrix.SentinelTargets(), func(t *testing.T, st matrix.Target) {
		matrix.RunScenarios(t, st, startEnv(t, st), scenarios(), nil)
	})
}

// TestRateLimitSentinelFailover: what survives a Sentinel failover that lost writes. A fixed window
// of 3 per minute admits 2 (replicated), then a 3rd while replication is held, and refuses a 4th.
// After the failover the window on the new primary holds only the 2 replicated admissions, so a
// permit is admitted once more: admissions after the last replicated write can be granted a second
// time (the documented limit of asynchronous replication), while the window itself survives.
func TestRateLimitSentinelFailover(t *testing.T) {
	for _, st := range matrix.SentinelTargets() {
		t.Run(st.Name, func(t *testing.T) {
			e := startEnv(t, st)
			lim := e.limiter(t, nil, e.key(t), ratelimit.FixedWindow{Limit: 3, Window: time.Minute})
			for range 2 {
				res, err := lim.AllowN(ctx(t), 1)
				require.NoError(t, err)
				require.True(t, res.Allowed)
			}
			require.NoError(t, e.Sentinel.WaitSync(ctx(t)))
			require.NoError(t, e.Sentinel.HoldReplication())
			res, err := lim.AllowN(ctx(t), 1)
			require.NoError(t, err)
			require.True(t, res.Allowed, "the 3rd permit")
			res, err = lim.AllowN(ctx(t), 1)
			require.NoError(t, err)
			require.False(t, res.Allowed, "the window is full")

			_, err = e.Sentinel.Failover(ctx(t))
			require.NoError(t, err)
			// The Sentinels close the client's connections once; until their switch message moves the
			// client it may still reach the old primary (a primary until the Sentinels turn it into a
			// replica seconds later), whose window holds the lost admission and stays full.
			require.Eventually(t, func() bool {
				res, err = lim.AllowN(ctx(t), 1)
				return err == nil && res.Allowed
			}, 20*time.Second, 50*time.Millisecond, "the lost 3rd admission is granted a second time")
			res, err = lim.AllowN(ctx(t), 1)
			require.NoError(t, err)
			require.False(t, res.Allowed, "the replicated window survives: full again")
		})
	}
}

package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSentinelFailoverLosesHeldWrite: a Sentinel client writes to the primary; a write made while
// replication is held is lost by the Sentinel failover; the client follows the new primary.
func TestSentinelFailoverLosesHeldWrite(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		g := StartSentinel(t, target)
		t.Logf("%s: %s", target, g)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := g.Client(t)
		require.NoError(t, c.Do(ctx, c.B().Set().Key("before").Value("1").Build()).Error())
		require.NoError(t, g.WaitSync(ctx))
		require.NoError(t, g.HoldReplication())
		require.NoError(t, c.Do(ctx, c.B().Set().Key("after").Value("2").Build()).Error())

		np, err := g.Failover(ctx)
		require.NoError(t, err)
		require.Same(t, g.Replica, np)
		cur, err := g.CurrentPrimary(ctx)
		require.NoError(t, err)
		assert.Same(t, g.Replica, cur)

		// The old primary still accepts writes until the Sentinels turn it into a replica (seconds
		// later), and the client reaches it until their switch message moves the client: a write
		// counts only once it is on the new primary.
		require.Eventually(t, func() bool {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if c.Do(cctx, c.B().Set().Key("later").Value("3").Build()).Error() != nil {
				return false
			}
			got, err := rawDo(cctx, np.Addr, time.Second, "GET", "later")
			return err == nil && got == "3"
		}, 20*time.Second, 50*time.Millisecond, "the sentinel client follows the new primary")
		// A connection the old primary closed at its role change may fail one more command.
		get := func(k string) (string, error) {
			var v string
			var err error
			for range 5 {
				if v, err = c.Do(ctx, c.B().Get().Key(k).Build()).ToString(); err == nil || rueidis.IsRedisNil(err) {
					break
				}
			}
			return v, err
		}
		v, err := get("before")
		require.NoError(t, err)
		assert.Equal(t, "1", v)
		_, err = get("after")
		assert.True(t, rueidis.IsRedisNil(err), "the held write is lost: %v", err)
	})
}

package leader_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestLeaderIsLeaderGauge: the is-leader gauge reports 1 for the leader and 0 for a running follower
// (by instance), and nothing for an Election whose Run returned; many Elections started and stopped
// on one meter provider leave no callbacks behind; a second Run reports again.
func TestLeaderIsLeaderGauge(t *testing.T) {
	for _, mt := range matrix.Targets() {
		t.Run(mt.Name, func(t *testing.T) {
			matrix.TakeSlot(t)
			e := startEnv(t, mt)
			c, _ := e.trackedClient(t)
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			name, _, _ := election("gauge")
			mk := func(inst string) *leader.Election {
				el, err := leader.New(c, name, leader.WithMeterProvider(mp), leader.WithInstance(inst),
					leader.WithLeaseDuration(leaseDuration), leader.WithSafetyMargin(safetyMargin),
					leader.WithRetryDelay(retryDelay))
				require.NoError(t, err)
				return el
			}
			a, b := mk("a"), mk("b")
			require.Empty(t, gaugePoints(t, reader), "not running: no points")
			ctx := context.Background()
			require.NoError(t, a.Start(ctx))
			require.Eventually(t, func() bool { _, ok := a.Current(); return ok }, 5*time.Second, 10*time.Millisecond)
			require.NoError(t, b.Start(ctx))
			require.Eventually(t, func() bool {
				p := gaugePoints(t, reader)
				return len(p) == 2 && p["a"] == 1 && p["b"] == 0
			}, 5*time.Second, 10*time.Millisecond, "leader 1, follower 0: %v", gaugePoints(t, reader))
			require.NoError(t, b.Stop(ctx))
			require.Equal(t, map[string]int64{"a": 1}, gaugePoints(t, reader), "stopped follower exports nothing")
			require.NoError(t, a.Stop(ctx))
			require.Empty(t, gaugePoints(t, reader), "stopped leader exports nothing")

			for i := range 20 {
				el := mk(fmt.Sprintf("m%d", i))
				require.NoError(t, el.Start(ctx))
				require.Eventually(t, func() bool { _, ok := gaugePoints(t, reader)[fmt.Sprintf("m%d", i)]; return ok },
					5*time.Second, 5*time.Millisecond)
				require.NoError(t, el.Stop(ctx))
			}
			require.Empty(t, gaugePoints(t, reader), "no callbacks left behind")

			require.NoError(t, a.Start(ctx)) // a second run registers again
			require.Eventually(t, func() bool { return gaugePoints(t, reader)["a"] == 1 }, 5*time.Second, 10*time.Millisecond)
			require.NoError(t, a.Stop(ctx))
			require.Empty(t, gaugePoints(t, reader))
		})
	}
}

// gaugePoints returns the is-leader gauge's points as instance -> value.
func gaugePoints(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return matrix.GaugePoints(t, r, leader.MetricIsLeader, string(leader.AttrInstance))
}

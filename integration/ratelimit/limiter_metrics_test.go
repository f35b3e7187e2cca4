package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// limiterMetricsScenarios returns the scenarios of this file.
func limiterMetricsScenarios() []scenario {
	return []scenario{
		{Name: "limiter_metrics_outcomes", Run: testLimiterMetrics},
	}
}

// limCounts collects the package's counters from r: "allowed" and "blocked:<reason>" → value. It
// fails on any attribute other than reason (keys and identities are never attributes).
func limCounts(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/coordkit/coordkit/ratelimit" {
			continue
		}
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok && sum.IsMonotonic, "%s is %T, want a monotonic int64 sum", m.Name, m.Data)
			for _, dp := range sum.DataPoints {
				switch m.Name {
				case ratelimit.MetricAllowed:
					require.Zero(t, dp.Attributes.Len(), "allowed has no attributes")
					out["allowed"] += dp.Value
				case ratelimit.MetricBlocked:
					require.Equal(t, 1, dp.Attributes.Len(), "blocked has only reason")
					v, ok := dp.Attributes.Value("reason")
					require.True(t, ok)
					out["blocked:"+v.AsString()] += dp.Value
				default:
					t.Fatalf("unexpected instrument %s", m.Name)
				}
			}
		}
	}
	return out
}

// Every completed AllowN / WaitN counts once in the counters and in Stats: admissions (probes
// included), capacity rejections (including above the capacity and a full queue), deny-list
// rejections; errors and cancellations are not counted.
func testLimiterMetrics(t *testing.T, e *env) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	client := e.NewClient(t, nil, matrix.NoCache)
	dl, err := denylist.New(client, e.key(t), denylist.WithCacheDuration(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = dl.Close(context.Background()) })

	l := e.limiter(t, client, e.key(t), ratelimit.FixedWindow{Limit: 2, Window: time.Minute},
		ratelimit.WithMeterProvider(mp), ratelimit.WithQueue(1, ratelimit.OldestFirst),
		ratelimit.WithDenyList(dl, "identity-secret-42"))
	for _, n := range []int64{0, 1, 1, 1, 5} { // probe, two admissions, a rejection, above the capacity
		_, err := l.AllowN(ctx(t), n)
		require.NoError(t, err)
	}
	_, err = l.AllowN(ctx(t), -1)
	require.ErrorIs(t, err, ratelimit.ErrNegativePermits)

	cctx, cancel := context.WithCancel(ctx(t))
	w := limWaitAsync(cctx, l, "w", 1)
	limWaitQueued(t, l, 1)
	res, err := l.WaitN(ctx(t), 1) // the queue (1 permit) is full
	require.ErrorIs(t, err, ratelimit.ErrQueueFull)
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	cancel()
	require.ErrorIs(t, limRecv(t, w).err, context.Canceled)

	require.NoError(t, dl.SetDenied(ctx(t), "identity-secret-42", true))
	for _, n := range []int64{0, 1} {
		res, err := l.AllowN(ctx(t), n)
		require.NoError(t, err)
		require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
	}
	res, err = l.WaitN(ctx(t), 1)
	require.ErrorIs(t, err, ratelimit.ErrDenied)
	require.Equal(t, ratelimit.ReasonDenyList, res.Reason)

	require.Equal(t, map[string]int64{
		"allowed":           3,
		"blocked:capacity":  3,
		"blocked:deny_list": 3,
	}, limCounts(t, reader))
	st := l.Stats()
	require.Equal(t, int64(3), st.Granted)
	require.Equal(t, int64(6), st.Rejected)
	require.Zero(t, st.Queued)
	require.Zero(t, st.Available, "the latest reply left no permit")
}

package hooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/testkit"
)

// isLeader reads the is-leader gauge's points as instance -> value.
func isLeader(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != leader.MetricIsLeader {
				continue
			}
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				v, _ := dp.Attributes.Value(leader.AttrInstance)
				out[v.AsString()] = dp.Value
			}
		}
	}
	return out
}

// TestLeaderIsLeaderGauge checks that two named elections in one process export separate is-leader
// series, the follower's included, and that the leader's hooks see its lock's operations.
func TestLeaderIsLeaderGauge(t *testing.T) {
	srv := testkit.Start(t, testkit.Targets()[0])
	client := srv.Client(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	j := &journal{}
	first, err := leader.New(client, "gauge", leader.WithName("first"), leader.WithMeterProvider(mp), leader.WithHooks(j))
	if err != nil {
		t.Fatal(err)
	}
	second, err := leader.New(client, "gauge", leader.WithName("second"), leader.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	if got := isLeader(t, reader); got["first"] != 0 || got["second"] != 0 || len(got) != 2 {
		t.Fatalf("before campaigning: %v", got)
	}
	ctx := context.Background()
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, ok := first.Current(); ok {
			break
		}
	}
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := isLeader(t, reader); got["first"] != 1 || got["second"] != 0 {
		t.Fatalf("while first leads: %v", got)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := isLeader(t, reader); got["first"] != 0 {
		t.Fatalf("after Stop: %v", got)
	}
	log := j.take()
	// The Election's own operations, and none of its lock's: a campaign, then (when leadership ends)
	// one resignation.
	if len(log) < 4 || log[0] != "admit LEADER CAMPAIGN" || log[1] != "done LEADER CAMPAIGN succeeded" ||
		log[len(log)-2] != "admit LEADER RESIGN" || log[len(log)-1] != "done LEADER RESIGN succeeded" {
		t.Fatalf("leader hooks journal %q: want LEADER CAMPAIGN first and LEADER RESIGN last", log)
	}
	for _, e := range log {
		if strings.Contains(e, "LOCK") {
			t.Fatalf("leader hooks journal %q: the lock's operations must create no scope", log)
		}
	}
}

// TestLeaderRejectedCampaign: a hook that refuses LEADER CAMPAIGN ends Run with its error unchanged,
// before the lease is written.
func TestLeaderRejectedCampaign(t *testing.T) {
	srv := testkit.Start(t, testkit.Targets()[0])
	j := &journal{}
	j.setReject("LEADER CAMPAIGN")
	e, err := leader.New(srv.Client(t), "refused", leader.WithHooks(j), leader.WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("Run = %v, want the rejection unchanged", err)
	}
	if exists(t, srv, e.LeaseKey()) {
		t.Fatal("a rejected campaign wrote the lease")
	}
	expect(t, j, "admit LEADER CAMPAIGN")
}

package hooks_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// counts collects the Int64 sum named name from r as "<by attribute>@<instance attribute>" -> value.
func counts(t *testing.T, r *sdkmetric.ManualReader, name string, by, instance attribute.Key) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value(by)
				in, _ := dp.Attributes.Value(instance)
				got[v.AsString()+"@"+in.AsString()] += dp.Value
			}
		}
	}
	return got
}

// equalCounts fails t unless got and want hold the same series with the same values.
func equalCounts(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s %v, want %v", what, got, want)
		}
	}
}

package idemhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestOutcomeCounter: each request answered before the store counts once as rejected, with the
// instance name; a request without a key that needs none is not counted. The outcomes that need a
// store (started, replayed, in_progress, mismatch) are counted in integration/idempotency.
func TestOutcomeCounter(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m := newNoIO(t, WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
		WithMaxRequestBody(4), WithMeterProvider(mp), WithInstance("orders"))
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct {
		method string
		keys   []string
		body   string
	}{
		{http.MethodPost, nil, ""},                // missing required: rejected
		{http.MethodPut, nil, ""},                 // missing optional: not counted
		{http.MethodPost, []string{"a", "b"}, ""}, // repeated: rejected
		{http.MethodPost, []string{"a"}, "12345"}, // too large: rejected
	} {
		r := httptest.NewRequest(tc.method, "/orders", strings.NewReader(tc.body))
		for _, k := range tc.keys {
			r.Header.Add(HeaderKey, k)
		}
		m.Handler(next).ServeHTTP(httptest.NewRecorder(), r)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != MetricOutcomes {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value("outcome")
				in, _ := dp.Attributes.Value(AttrInstance)
				got[o.AsString()+"@"+in.AsString()] += dp.Value
			}
		}
	}
	if len(got) != 1 || got["rejected@orders"] != 3 {
		t.Fatalf("outcomes %v, want rejected@orders: 3", got)
	}
}

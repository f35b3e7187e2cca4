package hooks_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// testRateLimitHTTPDecisions counts each decided request once by decision on a real limiter: two
// allowed, then one rejected for capacity, with the instance name.
func testRateLimitHTTPDecisions(t *testing.T, e *env) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	k, err := ratelimit.NewKeyed(e.client(t), ratelimit.FixedWindow{Limit: 2, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close(context.Background()) }()
	m, err := ratelimithttp.New(k, ratelimithttp.WithMeterProvider(mp), ratelimithttp.WithInstance("edge"),
		ratelimithttp.WithKey(func(*http.Request) (string, error) { return "hooks-rlhttp", nil }))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != want {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, want)
		}
	}
	want := map[string]int64{string(ratelimithttp.DecisionAllowed) + "@edge": 2, string(ratelimithttp.DecisionRejected) + "@edge": 1}
	equalCounts(t, "decisions", counts(t, reader, ratelimithttp.MetricDecisions, "decision", ratelimit.AttrInstance), want)
}

package hooks_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
	"github.com/coordkit/coordkit/testkit"
)

// TestIdemhttpOutcomes counts started, replayed, mismatch and in_progress requests on a real store.
func TestIdemhttpOutcomes(t *testing.T) {
	srv := testkit.Start(t, testkit.Targets()[0])
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	st, err := idempotency.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idemhttp.New(st, idemhttp.SharedScope(), idemhttp.WithMeterProvider(mp), idemhttp.WithName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(idemhttp.HeaderKey) == "slow" {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	do := func(key, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		r.Header.Set(idemhttp.HeaderKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := do("k1", "a"); c != http.StatusCreated {
		t.Fatalf("first = %d", c)
	}
	if c := do("k1", "a"); c != http.StatusCreated {
		t.Fatalf("replay = %d", c)
	}
	if c := do("k1", "b"); c != http.StatusUnprocessableEntity {
		t.Fatalf("mismatch = %d", c)
	}
	done := make(chan int, 1)
	go func() { done <- do("slow", "a") }()
	<-entered
	if c := do("slow", "a"); c != http.StatusConflict {
		t.Fatalf("in progress = %d", c)
	}
	close(release)
	if c := <-done; c != http.StatusCreated {
		t.Fatalf("slow = %d", c)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != idemhttp.MetricOutcomes {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value("outcome")
				in, _ := dp.Attributes.Value(idemhttp.AttrInstance)
				got[o.AsString()+"@"+in.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"started@orders": 2, "replayed@orders": 1, "mismatch@orders": 1, "in_progress@orders": 1}
	if len(got) != len(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("outcomes %v, want %v", got, want)
		}
	}
}

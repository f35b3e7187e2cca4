package ratelimithttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
)

// downClient fails every command at once, as an unreachable server would; its zero Builder accepts
// only keys of Cluster slot 0.
type downClient struct{ rueidis.Client }

func (downClient) B() rueidis.Builder       { return rueidis.Builder{} }
func (downClient) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (downClient) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.NewErrorResult(errors.New("connection refused"))
}

func slot0Key() string {
	for i := 0; ; i++ {
		if k := "rl" + strconv.Itoa(i); luakit.Slot(k) == 0 {
			return k
		}
	}
}

// TestDecisionCounter: each answered request counts once by decision, failures that let the handler
// run unprotected included, with the instance name. Allowed requests need a server
// (integration/ratelimit).
func TestDecisionCounter(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	k, err := ratelimit.NewKeyed(downClient{}, ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close(context.Background()) }()
	key := slot0Key()
	base := []Option{WithLogger(quiet), WithMeterProvider(mp), WithInstance("edge"),
		WithKey(func(*http.Request) (string, error) { return key, nil })}
	serve := func(opts ...Option) {
		m, err := New(k, append(append([]Option{}, base...), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).
			ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	serve(WithCost(func(*http.Request) int64 { return -1 }))
	serve(WithCost(func(*http.Request) int64 { return 11 }))
	serve(WithFailOpen(true))
	serve(WithFailOpen(true))
	serve()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricDecisions {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				d, _ := dp.Attributes.Value("decision")
				in, _ := dp.Attributes.Value(ratelimit.AttrInstance)
				got[d.AsString()+"@"+in.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"invalid@edge": 1, "rejected@edge": 1, "failed_open@edge": 2, "failed_closed@edge": 1}
	if len(got) != len(want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("decisions %v, want %v", got, want)
		}
	}
}

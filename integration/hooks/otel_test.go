package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/otelhook"
	"github.com/coordkit/coordkit/testkit"
)

type telemetry struct {
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	hook   *otelhook.Hook
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	h, err := otelhook.New(otelhook.WithTracerProvider(tp), otelhook.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	return &telemetry{spans: spans, reader: reader, hook: h}
}

var allowed = map[attribute.Key]bool{
	otelhook.AttrPrimitive: true, otelhook.AttrOperation: true, otelhook.AttrOutcome: true,
	otelhook.AttrInstance: true, otelhook.AttrErrorType: true,
}

// testLockSpansAndDurations drives a real Locker through every outcome and checks each span's name,
// attributes and status, the histogram's series, and that no key or token leaks into any attribute.
func testLockSpansAndDurations(t *testing.T, e *env) {
	client := e.client(t)
	tel := newTelemetry(t)
	locker, err := lock.New(client, lock.WithHooks(tel.hook), lock.WithInstance("orders"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const name = "otel-secret-name"
	lease, err := locker.TryAcquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.TryAcquire(ctx, name, time.Minute); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v, want ErrNotAcquired", err)
	}
	if _, err := locker.TryAcquire(ctx, name, -time.Second); err == nil {
		t.Fatal("negative TTL accepted")
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = locker.Acquire(cctx, name, time.Minute)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Acquire: %v, want a deadline", err)
	}
	if ok, err := lease.Extend(ctx); !ok || err != nil {
		t.Fatalf("Extend: %v %v", ok, err)
	}
	if _, err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	type want struct {
		name, outcome string
		status        codes.Code
	}
	wants := []want{
		{"LOCK TRY ACQUIRE", "succeeded", codes.Unset},
		{"LOCK TRY ACQUIRE", "succeeded", codes.Unset}, // busy: an answer
		{"LOCK TRY ACQUIRE", "failed", codes.Error},
		{"LOCK ACQUIRE", "canceled", codes.Unset},
		{"LOCK EXTEND", "succeeded", codes.Unset},
		{"LOCK RELEASE", "succeeded", codes.Unset},
	}
	got := tel.spans.GetSpans()
	if len(got) != len(wants) {
		t.Fatalf("%d spans, want %d: %v", len(got), len(wants), got)
	}
	secrets := []string{name, lease.OwnerToken(), lease.LeaseKey(), lease.FenceKey()}
	for _, n := range e.Nodes {
		secrets = append(secrets, n.Addr)
	}
	for i, s := range got {
		w := wants[i]
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes {
			if !allowed[kv.Key] {
				t.Errorf("span %d: unexpected attribute %s", i, kv.Key)
			}
			attrs[kv.Key] = kv.Value.String()
			for _, sec := range secrets {
				if strings.Contains(kv.Value.String(), sec) {
					t.Errorf("span %d: attribute %s carries a key, token or endpoint", i, kv.Key)
				}
			}
		}
		if s.Name != w.name || attrs[otelhook.AttrOperation] != w.name || attrs[otelhook.AttrPrimitive] != "lock" ||
			attrs[otelhook.AttrInstance] != "orders" || attrs[otelhook.AttrOutcome] != w.outcome || s.Status.Code != w.status {
			t.Errorf("span %d: %s %v status %v; want %+v", i, s.Name, attrs, s.Status.Code, w)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	series := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelhook.MetricDuration || m.Unit != "s" {
				t.Fatalf("metric %s unit %q", m.Name, m.Unit)
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				op, _ := dp.Attributes.Value(otelhook.AttrOperation)
				oc, _ := dp.Attributes.Value(otelhook.AttrOutcome)
				series[op.AsString()+"/"+oc.AsString()] += dp.Count
				for _, kv := range dp.Attributes.ToSlice() {
					if !allowed[kv.Key] {
						t.Errorf("histogram: unexpected attribute %s", kv.Key)
					}
				}
			}
		}
	}
	wantSeries := map[string]uint64{
		"LOCK TRY ACQUIRE/succeeded": 2, "LOCK TRY ACQUIRE/failed": 1, "LOCK ACQUIRE/canceled": 1,
		"LOCK EXTEND/succeeded": 1, "LOCK RELEASE/succeeded": 1,
	}
	if len(series) != len(wantSeries) {
		t.Fatalf("histogram series %v, want %v", series, wantSeries)
	}
	for k, v := range wantSeries {
		if series[k] != v {
			t.Errorf("histogram %s: %d, want %d (all: %v)", k, series[k], v, series)
		}
	}
}

// BenchmarkLockOTel is BenchmarkLockNoHooks with the OpenTelemetry adapter (SDK providers, every span
// sampled, spans dropped by no exporter): two operations per iteration.
func BenchmarkLockOTel(b *testing.B) {
	srv := testkit.Start(b, testkit.Targets()[0])
	tp := sdktrace.NewTracerProvider()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()
	h, err := otelhook.New(otelhook.WithTracerProvider(tp), otelhook.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	locker, err := lock.New(srv.Client(b), lock.WithHooks(h), lock.WithInstance("bench"))
	if err != nil {
		b.Fatal(err)
	}
	benchLock(b, locker)
}

package otelhook_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/otelhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// TestNestedOperationsGetOwnSpans checks that an operation started from inside a hook is admitted on
// its own, as a child of the span of the operation whose hook started it.
func TestNestedOperationsGetOwnSpans(t *testing.T) {
	tel := newTelemetry(t)
	outer := luakit.Operation{Primitive: "lock", Name: "LOCK ACQUIRE"}
	inner := luakit.Operation{Primitive: "counter", Name: "COUNTER INCREMENT"}
	hs := luakit.Hooks{tel.hook}
	ctx, sc, err := hs.Begin(context.Background(), outer)
	if err != nil {
		t.Fatal(err)
	}
	_, isc, err := hs.Begin(ctx, inner)
	if err != nil {
		t.Fatal(err)
	}
	isc.End(nil)
	sc.End(nil)
	spans := tel.spans.GetSpans()
	if len(spans) != 2 || spans[0].Name != inner.Name || spans[1].Name != outer.Name ||
		spans[0].Parent.SpanID() != spans[1].SpanContext.SpanID() {
		t.Fatalf("spans %v: want the inner one as a child of the outer one", spans)
	}
}

func BenchmarkAdmit(b *testing.B) {
	h, err := otelhook.New(otelhook.WithTracerProvider(sdktrace.NewTracerProvider()),
		otelhook.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	if err != nil {
		b.Fatal(err)
	}
	hs := luakit.Hooks{h}
	op := luakit.Operation{Primitive: "lock", Name: "LOCK TRY ACQUIRE", Instance: "orders"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, sc, _ := hs.Begin(ctx, op)
		sc.End(nil)
	}
}

// TestOutcomes checks each outcome's span status, attributes and series on synthetic operations.
func TestOutcomes(t *testing.T) {
	tel := newTelemetry(t)
	hs := luakit.Hooks{tel.hook}
	tests := []struct {
		name    string
		op      luakit.Operation
		err     error
		cancel  bool
		outcome string
		status  codes.Code
		errType string
	}{
		{"success", luakit.Operation{Primitive: "lease", Name: "LEASE ACQUIRE", Instance: "jobs"}, nil, false, "succeeded", codes.Unset, ""},
		{"failure", luakit.Operation{Primitive: "lease", Name: "LEASE RELEASE"}, errors.New("boom"), false, "failed", codes.Error, "unknown"},
		{"canceled", luakit.Operation{Primitive: "counter", Name: "COUNTER GET"}, context.Canceled, true, "canceled", codes.Unset, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel.spans.Reset()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, sc, err := hs.Begin(ctx, tt.op)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cancel {
				cancel()
			}
			sc.End(tt.err)
			spans := tel.spans.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			s := spans[0]
			attrs := map[attribute.Key]string{}
			for _, kv := range s.Attributes {
				if !allowed[kv.Key] {
					t.Errorf("unexpected attribute %s", kv.Key)
				}
				attrs[kv.Key] = kv.Value.String()
			}
			if s.Name != tt.op.Name || attrs[otelhook.AttrOutcome] != tt.outcome || s.Status.Code != tt.status ||
				attrs[otelhook.AttrErrorType] != tt.errType || attrs[otelhook.AttrInstance] != tt.op.Instance ||
				attrs[otelhook.AttrPrimitive] != tt.op.Primitive || attrs[otelhook.AttrOperation] != tt.op.Name {
				t.Fatalf("span %s %v status %v", s.Name, attrs, s.Status)
			}
			if _, ok := attrs[otelhook.AttrInstance]; ok != (tt.op.Instance != "") {
				t.Fatalf("instance attribute present=%v for instance %q", ok, tt.op.Instance)
			}
		})
	}
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelhook.MetricDuration || m.Unit != "s" {
				t.Fatalf("metric %s unit %q", m.Name, m.Unit)
			}
			n += len(m.Data.(metricdata.Histogram[float64]).DataPoints)
		}
	}
	if n != 3 {
		t.Fatalf("%d histogram series, want 3", n)
	}
}

// TestOptions: a nil Option is skipped; a nil provider selects the global one, as in every module.
func TestOptions(t *testing.T) {
	if _, err := otelhook.New(nil, nil); err != nil {
		t.Fatalf("New with nil options: %v", err)
	}
	for name, o := range map[string]otelhook.Option{"tracer": otelhook.WithTracerProvider(nil), "meter": otelhook.WithMeterProvider(nil)} {
		if _, err := otelhook.New(o); err != nil {
			t.Errorf("nil %s provider: %v, want the global provider", name, err)
		}
	}
}

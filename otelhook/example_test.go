package otelhook_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/otelhook"
)

// Wire the adapter to the OpenTelemetry Prometheus exporter, then pass it to primitives with their
// WithHooks option (lock.New(client, lock.WithHooks(h), lock.WithInstance("orders"))). The operation here
// is run through luakit.Hooks directly, as a primitive does, so the example needs no server.
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider() // add your span exporter with sdktrace.WithBatcher
	defer tp.Shutdown(context.Background())

	h, err := otelhook.New(otelhook.WithMeterProvider(mp), otelhook.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}

	_, scope, _ := luakit.Hooks{h}.Begin(context.Background(),
		luakit.Operation{Primitive: "lock", Name: "LOCK ACQUIRE", Instance: "orders"})
	scope.End(nil)

	families, err := registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "coordkit_") {
			m := f.GetMetric()[0]
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Println(f.GetName(), m.GetHistogram().GetSampleCount(), strings.Join(labels, " "))
		}
	}
	// Output:
	// coordkit_operation_duration_seconds 1 coordkit_instance=orders coordkit_operation=LOCK ACQUIRE coordkit_outcome=succeeded coordkit_primitive=lock
}

// Package otelhook is the OpenTelemetry adapter for Coordkit's operation hooks: a [luakit.Hook] that
// starts one span per admitted operation, named after it ("LOCK ACQUIRE"), and records its duration
// in the histogram coordkit.operation.duration (seconds).
//
// Spans and measurements carry only these attributes: coordkit.primitive, coordkit.operation,
// coordkit.outcome (succeeded, canceled, failed), coordkit.instance (the primitive's WithInstance, omitted
// when empty) and, on a failure, error.type (the error's class: transient, terminal, uncertain or
// unknown). Keys, hash fields, owner and fencing tokens, endpoints, fingerprints and error messages are
// never recorded. A failed operation sets the span status to Error; a canceled one leaves it unset.
//
// The hook admits every operation (it never rejects). Pass it to a primitive's WithHooks option:
//
//	h, _ := otelhook.New()
//	locker, _ := lock.New(client, lock.WithHooks(h), lock.WithInstance("orders"))
//
// Primitives import only the OpenTelemetry metric API; this module adds the trace API.
package otelhook

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/luakit"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/coordkit/coordkit/otelhook"

// MetricDuration is the histogram of operation durations, in seconds, from admission to completion.
const MetricDuration = "coordkit.operation.duration"

// The attribute keys the hook records.
const (
	AttrPrimitive = attribute.Key("coordkit.primitive")
	AttrOperation = attribute.Key("coordkit.operation")
	AttrOutcome   = attribute.Key("coordkit.outcome")
	AttrInstance  = attribute.Key("coordkit.instance")
	AttrErrorType = attribute.Key("error.type")
)

// durationBuckets are OpenTelemetry's recommended boundaries for durations in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Option configures [New]. A nil Option is skipped.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets the tracer provider. Default (or nil): otel.GetTracerProvider() at New, as
// in every module.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) error {
		c.tp = tp
		return nil
	})
}

// WithMeterProvider sets the meter provider. Default (or nil): otel.GetMeterProvider() at New, as in
// every module.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		c.mp = mp
		return nil
	})
}

// Hook is the OpenTelemetry [luakit.Hook]. It is safe for concurrent use and may be shared by any
// number of primitives.
type Hook struct {
	tracer   trace.Tracer
	duration metric.Float64Histogram
}

var _ luakit.Hook = (*Hook)(nil)

// New returns a Hook using the configured providers. It fails with an error matching
// luakit.ErrInvalidConfig for an invalid option, and when the meter refuses the histogram.
func New(opts ...Option) (*Hook, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	d, err := c.mp.Meter(ScopeName).Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of Coordkit operations, from admission to the caller's result."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelhook: metric %s: %w", MetricDuration, err)
	}
	return &Hook{tracer: c.tp.Tracer(ScopeName), duration: d}, nil
}

// Admit starts the operation's span in ctx and returns the span's context and a completion that ends
// it and records the duration. It never rejects.
func (h *Hook) Admit(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, AttrPrimitive.String(op.Primitive), AttrOperation.String(op.Name))
	if op.Instance != "" {
		attrs = append(attrs, AttrInstance.String(op.Instance))
	}
	ctx, span := h.tracer.Start(ctx, op.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	start := time.Now()
	return ctx, func(o luakit.HookOutcome, err error) {
		elapsed := time.Since(start).Seconds()
		n := len(attrs)
		attrs = append(attrs, AttrOutcome.String(o.String()))
		if o == luakit.OutcomeFailed {
			attrs = append(attrs, AttrErrorType.String(luakit.Classify(err).String()))
			span.SetStatus(codes.Error, "failed")
		}
		span.SetAttributes(attrs[n:]...)
		h.duration.Record(ctx, elapsed, metric.WithAttributes(attrs...))
		span.End()
	}, nil
}

package ratelimithttp

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/ratelimit"
)

// MetricDecisions is the name of the Int64Counter the [Middleware] increments once per request it
// answers, under the instrumentation scope "github.com/coordkit/coordkit/ratelimit/ratelimithttp"
// (provider: [WithMeterProvider]). Attribute "decision" ([Decision] values): "allowed",
// "rejected" (any 429), "failed_open" (the limiter failed and the handler ran unprotected,
// [WithFailOpen]), "failed_closed" (the limiter failed: 503) or "invalid" (a key, cost or identity
// function failed: 500); and "coordkit.instance" with the [WithInstance] label, omitted when there is
// none. A request whose client went away is not counted. Keys and identities are never attributes.
const MetricDecisions = "coordkit.rate_limit.http.decisions"

// Decision is a value of the "decision" attribute of [MetricDecisions].
type Decision string

// The decisions counted by [MetricDecisions].
const (
	DecisionAllowed      Decision = "allowed"
	DecisionRejected     Decision = "rejected"
	DecisionFailedOpen   Decision = "failed_open"
	DecisionFailedClosed Decision = "failed_closed"
	DecisionInvalid      Decision = "invalid"
)

var decisions = []Decision{DecisionAllowed, DecisionRejected, DecisionFailedOpen, DecisionFailedClosed, DecisionInvalid}

const meterName = "github.com/coordkit/coordkit/ratelimit/ratelimithttp"

// counter is the decision counter with one pre-built attribute set per decision: counting allocates
// nothing per request.
type counter struct {
	c     metric.Int64Counter
	attrs map[Decision]metric.AddOption
}

func newCounter(mp metric.MeterProvider, instance string) (*counter, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	c, err := mp.Meter(meterName).Int64Counter(MetricDecisions,
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests answered by the rate-limit middleware, by decision."))
	if err != nil {
		return nil, fmt.Errorf("ratelimithttp: metric %s: %w: %w", MetricDecisions, ratelimit.ErrInvalidConfig, err)
	}
	out := &counter{c: c, attrs: make(map[Decision]metric.AddOption, len(decisions))}
	for _, d := range decisions {
		kv := []attribute.KeyValue{attribute.String("decision", string(d))}
		if instance != "" {
			kv = append(kv, attribute.String(ratelimit.AttrInstance, instance))
		}
		out.attrs[d] = metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	return out, nil
}

// count records one decision.
func (c *counter) count(d Decision) { c.c.Add(context.Background(), 1, c.attrs[d]) }

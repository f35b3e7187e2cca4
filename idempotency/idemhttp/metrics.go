package idemhttp

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// MetricOutcomes is the name of the Int64Counter the [Middleware] increments once per request that
// carries an Idempotency-Key header (or is answered 400 for lacking a required one), under the
// instrumentation scope "github.com/coordkit/coordkit/idempotency/idemhttp" (provider:
// [WithMeterProvider]). Attribute "outcome" ([RequestOutcome] values): "started" (the claim was taken and
// the handler ran), "replayed" (a stored response was replayed), "in_progress" (409), "mismatch"
// (422), "rejected" (answered without claiming: a missing, repeated or malformed key, an unreadable
// or too large body, a failed scope or fingerprint function), "failed_open" (the store failed and
// the handler ran without protection, [WithFailOpen]), "unavailable" (the store failed: 503) or
// "error" (foreign or malformed stored data: 500); and "coordkit.instance" with the [WithInstance] name,
// omitted when there is none. A request whose client went away is not counted. Keys, scopes and
// fingerprints are never attributes.
const MetricOutcomes = "coordkit.idempotency.http.requests"

// RequestOutcome is a value of the "outcome" attribute of [MetricOutcomes].
type RequestOutcome string

// The outcomes counted by [MetricOutcomes].
const (
	OutcomeStarted     RequestOutcome = "started"
	OutcomeReplayed    RequestOutcome = "replayed"
	OutcomeInProgress  RequestOutcome = "in_progress"
	OutcomeMismatch    RequestOutcome = "mismatch"
	OutcomeRejected    RequestOutcome = "rejected"
	OutcomeFailedOpen  RequestOutcome = "failed_open"
	OutcomeUnavailable RequestOutcome = "unavailable"
	OutcomeError       RequestOutcome = "error"
)

var outcomes = []RequestOutcome{OutcomeStarted, OutcomeReplayed, OutcomeInProgress, OutcomeMismatch, OutcomeRejected,
	OutcomeFailedOpen, OutcomeUnavailable, OutcomeError}

// AttrInstance is the attribute key of the instance name ([WithInstance]).
const AttrInstance = "coordkit.instance"

const meterName = "github.com/coordkit/coordkit/idempotency/idemhttp"

// counter is the outcome counter with one pre-built attribute set per outcome: counting allocates
// nothing per request.
type counter struct {
	c     metric.Int64Counter
	attrs map[RequestOutcome]metric.AddOption
}

func newCounter(mp metric.MeterProvider, instance string) (*counter, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	c, err := mp.Meter(meterName).Int64Counter(MetricOutcomes,
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests with an Idempotency-Key answered by the middleware, by outcome."))
	if err != nil {
		return nil, fmt.Errorf("idemhttp: metric %s: %w: %w", MetricOutcomes, luakit.ErrInvalidConfig, err)
	}
	out := &counter{c: c, attrs: make(map[RequestOutcome]metric.AddOption, len(outcomes))}
	for _, o := range outcomes {
		kv := []attribute.KeyValue{attribute.String("outcome", string(o))}
		if instance != "" {
			kv = append(kv, attribute.String(AttrInstance, instance))
		}
		out.attrs[o] = metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	return out, nil
}

// count records one outcome.
func (c *counter) count(o RequestOutcome) { c.c.Add(context.Background(), 1, c.attrs[o]) }

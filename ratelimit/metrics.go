package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The OpenTelemetry instruments of the package, created from the [WithMeterProvider] provider under the
// instrumentation scope "github.com/coordkit/coordkit/ratelimit".
const (
	// MetricAllowed is the name of the Int64Counter incremented once per admitted AllowN or WaitN call
	// (whatever n, however many queued retries it took; n = 0 probes count). Attribute
	// "coordkit.instance" ([AttrInstance]): the [WithInstance] label, omitted when there is none.
	MetricAllowed = "coordkit.rate_limit.allowed"
	// MetricBlocked is the name of the Int64Counter incremented once per AllowN or WaitN call that
	// ended not admitted. Attribute "reason": "deny_list" or "capacity" (which includes requests larger
	// than the capacity and requests rejected or evicted by a full local queue). Calls that end with an
	// error or a cancellation are not counted. Attribute "coordkit.instance" as for MetricAllowed. Keys and
	// identities are never attributes.
	MetricBlocked = "coordkit.rate_limit.blocked"
)

// meterName is the instrumentation scope of the package's instruments.
const meterName = "github.com/coordkit/coordkit/ratelimit"

// metrics holds the counters shared by a Limiter (or by every key of a Keyed).
type metrics struct {
	allowed metric.Int64Counter
	blocked metric.Int64Counter
	// Pre-built attribute options, passed as whole slices (allowAttr...): recording allocates nothing
	// per call, where a single option argument would build a variadic slice each time.
	allowAttr, denyAttr, capAttr []metric.AddOption
}

// newMetrics creates the instruments; instance (the WithInstance label) becomes the coordkit.instance
// attribute of every measurement unless it is empty.
func newMetrics(mp metric.MeterProvider, instance string) (*metrics, error) {
	m := mp.Meter(meterName)
	allowed, err := m.Int64Counter(MetricAllowed,
		metric.WithUnit("{request}"),
		metric.WithDescription("Rate-limit decisions that admitted the request."))
	if err != nil {
		return nil, fmt.Errorf("ratelimit: metric %s: %w", MetricAllowed, err)
	}
	blocked, err := m.Int64Counter(MetricBlocked,
		metric.WithUnit("{request}"),
		metric.WithDescription("Rate-limit decisions that did not admit the request, by reason."))
	if err != nil {
		return nil, fmt.Errorf("ratelimit: metric %s: %w", MetricBlocked, err)
	}
	attrs := func(kv ...attribute.KeyValue) []metric.AddOption {
		if instance != "" {
			kv = append(kv, attribute.String(AttrInstance, instance))
		}
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	return &metrics{
		allowed:   allowed,
		blocked:   blocked,
		allowAttr: attrs(),
		denyAttr:  attrs(attribute.String("reason", string(ReasonDenyList))),
		capAttr:   attrs(attribute.String("reason", string(ReasonCapacity))),
	}, nil
}

// counts are the per-instance statistics behind [Stats].
type counts struct {
	granted, rejected atomic.Int64
	available         atomic.Int64 // -1 before the first server reply
}

func newCounts() *counts {
	c := &counts{}
	c.available.Store(-1)
	return c
}

// record counts one final outcome in the metrics and in c (either may be nil).
func (m *metrics) record(c *counts, res Result) {
	// The counters are independent of any caller's context: a final outcome is always recorded.
	ctx := context.Background()
	if res.Allowed {
		if m != nil {
			m.allowed.Add(ctx, 1, m.allowAttr...)
		}
		if c != nil {
			c.granted.Add(1)
		}
		return
	}
	if m != nil {
		if res.Reason == ReasonDenyList {
			m.blocked.Add(ctx, 1, m.denyAttr...)
		} else {
			m.blocked.Add(ctx, 1, m.capAttr...)
		}
	}
	if c != nil {
		c.rejected.Add(1)
	}
}

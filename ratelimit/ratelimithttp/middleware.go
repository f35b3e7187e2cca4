package ratelimithttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
)

// Header field names. net/http canonicalises them on the wire ("Ratelimit-Policy"); field names are
// case-insensitive.
const (
	// HeaderRateLimitPolicy carries the quota policy: "name";q=<quota>;w=<window seconds>.
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderXRateLimitLimit, HeaderXRateLimitRemaining and HeaderXRateLimitReset are the legacy
	// de-facto fields sent only with [WithLegacyHeaders]: the binding quota's limit, its remaining
	// permits, and the seconds (rounded up) until it resets (the RateLimit field's t).
	HeaderXRateLimitLimit     = "X-RateLimit-Limit"
	HeaderXRateLimitRemaining = "X-RateLimit-Remaining"
	HeaderXRateLimitReset     = "X-RateLimit-Reset"
	// HeaderRateLimit carries the current service limit: "name";r=<remaining>;t=<seconds to reset>.
	HeaderRateLimit = "RateLimit"
	// HeaderRetryAfter carries the seconds (rounded up) until a rejected request could pass.
	HeaderRetryAfter = "Retry-After"
)

// maxSFInteger is the largest Structured Field Integer (RFC 9651: at most 15 digits). Policy limits
// go up to 2^50, which has 16; larger values are sent as this.
const maxSFInteger = 999_999_999_999_999

// Middleware applies a [ratelimit.Keyed] limit to HTTP handlers. Create it with [New]; it is safe for
// concurrent use and may wrap many handlers, which then share its limits (use several Keyed limiters
// and Middlewares for per-route limits, or put the route into the key with [WithKey]).
//
// For each request it computes the key ([WithKey]) and the cost ([WithCost]) and makes one decision
// with [ratelimit.Keyed.AllowN] (one capacity script, none when the cost exceeds the capacity; plus
// one deny-list read on a cache miss with [ratelimit.WithKeyedDenyList]). The response to each
// decision (status, header fields, whether the handler runs) is the table in the package
// documentation, "Decisions"; an allowed request's decision is in its context ([ResultFrom]).
// Rejections are written by [WriteTooManyRequests] unless [WithRejected] replaces it. Every answered
// request counts once in [MetricDecisions], by decision (failures that ran the handler unprotected
// as "failed_open").
type Middleware struct {
	limiter *ratelimit.Keyed
	cfg     config
	counter *counter
}

var errEmptyKey = errors.New("ratelimithttp: key func returned an empty key")

// New returns a Middleware deciding with limiter. It does no I/O and never closes the limiter. It
// fails, with an error matching [ratelimit.ErrInvalidConfig], for a nil limiter, an invalid option,
// or policy names ([WithPolicyNames]) whose count does not match the limiter's policy.
func New(limiter *ratelimit.Keyed, opts ...Option) (*Middleware, error) {
	if limiter == nil {
		return nil, luakit.InvalidConfig("ratelimithttp", "nil limiter")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	comp, composite := limiter.Policy().(ratelimit.Composite)
	want := 1
	if composite {
		want = len(comp.Components)
	}
	switch {
	case cfg.names == nil && !composite:
		cfg.names = []string{DefaultPolicyName}
	case cfg.names == nil:
		for i := range want {
			cfg.names = append(cfg.names, DefaultPolicyName+"."+strconv.Itoa(i))
		}
	case len(cfg.names) != want:
		return nil, luakit.InvalidConfig("ratelimithttp", "%d policy names for a policy with %d component(s)", len(cfg.names), want)
	}
	c, err := newCounter(cfg.meterProvider, cfg.instance)
	if err != nil {
		return nil, err
	}
	return &Middleware{limiter: limiter, cfg: cfg, counter: c}, nil
}

// Handler wraps next with the rate limit; see [Middleware] for the responses. Rate-limit fields are
// set on w's header before next runs, so next may read or override them.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := m.cfg.key(r)
	if err == nil && key == "" {
		err = errEmptyKey
	}
	if err != nil {
		m.cfg.logger.Error("coordkit/ratelimithttp: key func failed", "error", err)
		m.counter.count(DecisionInvalid)
		problem(w, http.StatusInternalServerError, "rate-limit key unavailable")
		return
	}
	cost := m.cfg.cost(r)
	if cost < 0 {
		m.cfg.logger.Error("coordkit/ratelimithttp: cost func returned a negative cost", "cost", cost)
		m.counter.count(DecisionInvalid)
		problem(w, http.StatusInternalServerError, "invalid rate-limit cost")
		return
	}
	res, err := m.decide(r.Context(), key, cost)
	if err != nil {
		if errors.Is(r.Context().Err(), context.Canceled) {
			return // the client has gone; nobody reads a reply
		}
		if errors.Is(err, ratelimit.ErrEmptyIdentity) {
			m.cfg.logger.Error("coordkit/ratelimithttp: deny-list identity func returned an empty identity")
			m.counter.count(DecisionInvalid)
			problem(w, http.StatusInternalServerError, "rate-limit key unavailable")
			return
		}
		m.cfg.logger.Warn("coordkit/ratelimithttp: rate limiter unavailable", "error", err, "fail_open", m.cfg.failOpen)
		if m.cfg.failOpen {
			m.counter.count(DecisionFailedOpen)
			next.ServeHTTP(w, r)
			return
		}
		m.counter.count(DecisionFailedClosed)
		problem(w, http.StatusServiceUnavailable, "rate limiter unavailable")
		return
	}
	h := w.Header()
	if res.Reason != ratelimit.ReasonDenyList {
		name, limit, _ := m.describe(res)
		h.Set(HeaderRateLimitPolicy, m.policyList(res))
		if !res.At.IsZero() {
			h.Set(HeaderRateLimit, limitField(name, res.Remaining, effectiveWindow(res)))
		}
		if m.cfg.legacy {
			h.Set(HeaderXRateLimitLimit, strconv.FormatInt(limit, 10))
			if !res.At.IsZero() {
				h.Set(HeaderXRateLimitRemaining, strconv.FormatInt(max(res.Remaining, 0), 10))
				h.Set(HeaderXRateLimitReset, strconv.FormatInt(ceilSeconds(effectiveWindow(res)), 10))
			}
		}
	}
	if res.Allowed {
		m.counter.count(DecisionAllowed)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resultKey{}, res)))
		return
	}
	if res.RetryAfter > 0 {
		h.Set(HeaderRetryAfter, strconv.FormatInt(ceilSeconds(res.RetryAfter), 10))
	}
	m.counter.count(DecisionRejected)
	m.cfg.rejected(w, r, res)
}

// decide makes one decision, bounded by the timeout option and the request's context. The limiter
// sends its scripts without a socket deadline (a timed-out decision leaves the shared connection open
// for other requests' decisions), so nothing here needs to strip the deadline.
func (m *Middleware) decide(ctx context.Context, key string, cost int64) (ratelimit.Result, error) {
	if m.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.cfg.timeout)
		defer cancel()
	}
	return m.limiter.AllowN(ctx, key, cost)
}

type resultKey struct{}

// ResultFrom returns the decision that admitted the request whose context is ctx: handlers wrapped
// by a [Middleware] can read the remaining permits or the server time of the decision. ok is false
// for any other context, including a request the middleware let through unprotected
// ([WithFailOpen]).
func ResultFrom(ctx context.Context) (ratelimit.Result, bool) {
	res, ok := ctx.Value(resultKey{}).(ratelimit.Result)
	return res, ok
}

// policyList is the RateLimit-Policy field value: one item per component of a composite, in order
// (every quota a client is subject to, binding or not), or the single policy; the component res
// reports on takes res.Limit.
func (m *Middleware) policyList(res ratelimit.Result) string {
	c, ok := m.limiter.Policy().(ratelimit.Composite)
	if !ok || len(c.Components) <= 1 {
		name, limit, window := m.describe(res)
		return policyField(name, limit, window)
	}
	items := make([]string, len(c.Components))
	for i, comp := range c.Components {
		limit, window := quota(comp)
		if i == res.Component && res.Limit > 0 {
			limit = res.Limit
		}
		items[i] = policyField(m.componentName(i), limit, window)
	}
	return strings.Join(items, ", ")
}

func (m *Middleware) componentName(i int) string {
	if i < len(m.cfg.names) {
		return m.cfg.names[i]
	}
	return DefaultPolicyName + "." + strconv.Itoa(i)
}

// describe returns the name, quota and window of the policy (or composite component) that res
// reports on.
func (m *Middleware) describe(res ratelimit.Result) (name string, limit int64, window time.Duration) {
	p := m.limiter.Policy()
	i := 0
	if c, ok := p.(ratelimit.Composite); ok && len(c.Components) > 0 {
		if res.Component >= 0 && res.Component < len(c.Components) {
			i = res.Component
		}
		p = c.Components[i]
	}
	limit, window = quota(p)
	if res.Limit > 0 {
		limit = res.Limit
	}
	return m.componentName(i), limit, window
}

// quota returns the capacity and the window of a standalone policy or component: the window of a
// fixed or sliding window, the full refill time of a token bucket (ceil(Limit/TokensPerPeriod)
// periods), and Burst × EmissionInterval for GCRA (the time an empty burst takes to refill).
// The durations are the enforced ones (the limiter's Policy reports them rounded up to whole
// microseconds).
func quota(p ratelimit.Policy) (limit int64, window time.Duration) {
	switch p := p.(type) {
	case ratelimit.FixedWindow:
		return p.Limit, p.Window
	case ratelimit.SlidingWindow:
		return p.Limit, p.Window
	case ratelimit.TokenBucket:
		if p.TokensPerPeriod <= 0 {
			return p.Limit, 0
		}
		periods := (p.Limit + p.TokensPerPeriod - 1) / p.TokensPerPeriod
		return p.Limit, mulSat(p.Period, periods)
	case ratelimit.GCRA:
		return p.Burst, mulSat(p.EmissionInterval, p.Burst)
	}
	return 0, 0
}

// effectiveWindow is the "t" parameter of the RateLimit field for res: the time until the policy is
// back at full capacity (Result.Reset), except on a rejection with a Retry-After, where it ends no later
// than the Retry-After. The draft says Retry-After SHOULD NOT reference a point earlier than the end of
// the effective window, and a policy that refills gradually (token bucket, GCRA, a sliding window over
// several segments, composites) lets the request pass before it is full again.
func effectiveWindow(res ratelimit.Result) time.Duration {
	if !res.Allowed && res.RetryAfter > 0 && res.RetryAfter < res.Reset {
		return res.RetryAfter
	}
	return res.Reset
}

// PolicyField formats a RateLimit-Policy field value with one policy: "name";q=<limit>;w=<window>,
// the window in whole seconds rounded up and at least 1, name as a Structured Field String. Values
// above the Structured Field Integer range (15 digits) are sent as its maximum. A name that is empty,
// longer than [MaxPolicyNameLength] or holds a byte outside printable ASCII (CR, LF and every other
// control byte included, which would split or forge header lines) is rejected with an error matching
// ratelimit.ErrInvalidConfig and an empty string.
func PolicyField(name string, limit int64, window time.Duration) (string, error) {
	if err := validName(name); err != nil {
		return "", err
	}
	return policyField(name, limit, window), nil
}

func policyField(name string, limit int64, window time.Duration) string {
	w := max(ceilSeconds(window), 1)
	return sfString(name) + ";q=" + sfInt(limit) + ";w=" + sfInt(w)
}

// LimitField formats a RateLimit field value for one policy: "name";r=<remaining>;t=<reset>, reset
// in whole seconds rounded up (0 when the quota is already full), name as a Structured Field String.
// Negative values are sent as 0. A name [PolicyField] rejects (CR, LF, any control byte...) is
// rejected in the same way.
func LimitField(name string, remaining int64, reset time.Duration) (string, error) {
	if err := validName(name); err != nil {
		return "", err
	}
	return limitField(name, remaining, reset), nil
}

func limitField(name string, remaining int64, reset time.Duration) string {
	return sfString(name) + ";r=" + sfInt(remaining) + ";t=" + sfInt(ceilSeconds(reset))
}

// WriteTooManyRequests is the default rejection writer: 429 Too Many Requests with an RFC 9457
// problem+json body. The header fields set by the middleware are sent with it.
func WriteTooManyRequests(w http.ResponseWriter, _ *http.Request, _ ratelimit.Result) {
	problem(w, http.StatusTooManyRequests, "rate limit exceeded")
}

// problem writes an RFC 9457 problem response.
func problem(w http.ResponseWriter, status int, title string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"title":%s,"status":%d}`, strconv.Quote(title), status)
}

// sfString formats s (printable ASCII, as validName ensures) as a Structured Field String.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// sfInt formats v as a non-negative Structured Field Integer, clamped to its range.
func sfInt(v int64) string {
	return strconv.FormatInt(min(max(v, 0), maxSFInteger), 10)
}

// ceilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// mulSat is d × n, saturating at the largest Duration.
func mulSat(d time.Duration, n int64) time.Duration {
	if d <= 0 || n <= 0 {
		return 0
	}
	if n > int64(time.Duration(1<<63-1)/d) {
		return time.Duration(1<<63 - 1)
	}
	return d * time.Duration(n)
}

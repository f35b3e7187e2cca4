package ratelimithttp

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
)

// Option configures a [Middleware]. Options are applied in order by [New]; an invalid value makes New
// fail with an error matching [ratelimit.ErrInvalidConfig]. A nil Option is skipped.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	key      func(*http.Request) (string, error)
	cost     func(*http.Request) int64
	names    []string // nil: defaultName / defaultName.i
	failOpen bool
	rejected func(http.ResponseWriter, *http.Request, ratelimit.Result)
	logger   *slog.Logger
	timeout  time.Duration // 0: the request's context only
	legacy   bool          // WithLegacyHeaders

	meterProvider metric.MeterProvider // nil: the global provider
	instance      string               // WithInstance
}

// DefaultPolicyName is the policy name of the RateLimit-Policy and RateLimit fields unless
// [WithPolicyNames] says otherwise. The components of a composite are named "default.0",
// "default.1", ... by default.
const DefaultPolicyName = "default"

func defaultConfig() config {
	return config{
		key:      RemoteIP,
		cost:     func(*http.Request) int64 { return 1 },
		rejected: WriteTooManyRequests,
		logger:   slog.Default(),
	}
}

// RemoteIP is the default key function: the client IP of r.RemoteAddr without the port (the address
// of the TCP peer as net/http reports it). It never reads X-Forwarded-For, Forwarded or X-Real-IP:
// any client can forge those. Behind a reverse proxy every request then shares the proxy's address;
// use [WithKey] with a function that trusts exactly the proxies you run. It returns an error only
// when RemoteAddr is empty.
func RemoteIP(r *http.Request) (string, error) {
	if r.RemoteAddr == "" {
		return "", errors.New("ratelimithttp: request has no RemoteAddr")
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		// Not host:port (a Unix socket peer, or a RemoteAddr set by a test): use it whole.
		return r.RemoteAddr, nil
	}
	return host, nil
}

// WithKey sets the function naming the rate-limited caller of a request (an API key, a tenant, a
// user): each distinct key is its own limit on the server (after the [ratelimit.Keyed]'s prefix). It
// runs for every request, after the handlers wrapping the middleware (put authentication outside it).
// When it returns an error or an empty key, the middleware answers 500 without deciding or calling
// the handler, and logs the error. Default (also for a nil fn): [RemoteIP].
func WithKey(fn func(r *http.Request) (string, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			fn = RemoteIP
		}
		c.key = fn
		return nil
	})
}

// WithCost sets how many permits a request takes (its weight). A cost of 0 consumes nothing: the
// request passes when at least one permit is available (a probe). A negative cost is a programming
// error: the middleware answers 500 without deciding or calling the handler. A cost above the
// policy's capacity can never pass: it is answered 429 without Retry-After, without a capacity
// script (a bound deny list is still checked first). Default (also for a nil fn): 1 for every
// request.
func WithCost(fn func(r *http.Request) int64) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			fn = defaultConfig().cost
		}
		c.cost = fn
		return nil
	})
}

// WithPolicyNames sets the policy names sent in the RateLimit-Policy and RateLimit fields: one name
// for a standalone policy, or one per component for a [ratelimit.Composite] (in component order;
// the RateLimit field names the binding component, see [ratelimit.Result.Component]). A name is 1 to 64 printable
// ASCII characters; it is sent as a Structured Field string. New fails when the count does not
// match the limiter's policy. Default: [DefaultPolicyName], or "default.0", "default.1", ... for the
// components of a composite.
func WithPolicyNames(names ...string) Option {
	return optionFunc(func(c *config) error {
		if len(names) == 0 {
			return luakit.InvalidConfig("ratelimithttp", "no policy names")
		}
		for _, n := range names {
			if err := validName(n); err != nil {
				return err
			}
		}
		c.names = append([]string(nil), names...)
		return nil
	})
}

// WithLegacyHeaders also sends the legacy X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset fields (for clients that predate the IETF fields), describing the same binding
// quota as the RateLimit field; Reset is a delta in whole seconds, rounded up. Remaining and Reset
// are omitted for decisions made without the server, like the RateLimit field. Default: off.
func WithLegacyHeaders(on bool) Option {
	return optionFunc(func(c *config) error {
		c.legacy = on
		return nil
	})
}

// WithFailOpen decides what happens when the limiter fails (server unreachable, timeout, uncertain
// outcome, a foreign value at the key, a closed limiter). Fail closed (false, the default) answers
// 503 Service Unavailable without the rate-limit fields and does not call the handler. Fail open
// (true) calls the handler without protection and without the rate-limit fields. Either way every
// failure is logged at warn level with fail_open set (see [WithLogger]), so an unprotected request is
// never silent. A request whose client has gone away (its context cancelled) is not answered at all;
// a request whose context deadline passed is answered like any other failure.
func WithFailOpen(open bool) Option {
	return optionFunc(func(c *config) error {
		c.failOpen = open
		return nil
	})
}

// WithMeterProvider sets the OpenTelemetry meter provider of the [MetricDecisions] counter. Default
// (also for a nil mp): the global provider, otel.GetMeterProvider(), looked up by [New].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		c.meterProvider = mp
		return nil
	})
}

// WithInstance labels the middleware in its metrics: the attribute coordkit.instance on
// [MetricDecisions] (omitted when instance is ""). It must not be a key or an identity. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error {
		c.instance = instance
		return nil
	})
}

// WithTimeout bounds each decision: when the server has not answered within d, the decision fails
// (an uncertain outcome: the permits may have been consumed) and [WithFailOpen] decides the
// response. Without it a decision waits as long as the request's context allows, so an unresponsive
// server holds requests until then. d must not be negative; 0 means no bound of its own. Default: 0.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return luakit.InvalidConfig("ratelimithttp", "timeout %v is negative", d)
		}
		c.timeout = d
		return nil
	})
}

// WithRejected sets the function that writes the response to a rejected request. When it runs, the
// middleware has already set the Retry-After and rate-limit header fields on w (see [Middleware]); it
// must write the status and body, for example 403 for res.Reason == ratelimit.ReasonDenyList. The
// handler is not called. Default (also for a nil fn): [WriteTooManyRequests].
func WithRejected(fn func(w http.ResponseWriter, r *http.Request, res ratelimit.Result)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			fn = WriteTooManyRequests
		}
		c.rejected = fn
		return nil
	})
}

// WithLogger sets the logger for limiter failures (warn level, with the error and fail_open) and
// key or cost function errors (error level). Keys are never logged. Default (also for a nil l):
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	})
}

// MaxPolicyNameLength is the longest accepted policy name, in bytes.
const MaxPolicyNameLength = 64

func validName(n string) error {
	if n == "" || len(n) > MaxPolicyNameLength {
		return luakit.InvalidConfig("ratelimithttp", "policy name length %d outside 1..%d", len(n), MaxPolicyNameLength)
	}
	for i := 0; i < len(n); i++ {
		if n[i] < 0x20 || n[i] > 0x7e {
			return luakit.InvalidConfig("ratelimithttp", "policy name %q holds a byte outside printable ASCII", n)
		}
	}
	return nil
}

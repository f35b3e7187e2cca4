package idemhttp

import (
	"go.opentelemetry.io/otel/metric"
	"log/slog"
	"net/http"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Middleware]. Options are applied in order by [New]; invalid values make New
// fail with an error matching luakit.ErrInvalidConfig. A nil Option is ignored.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	required       func(*http.Request) bool
	scope          func(*http.Request) (string, error)
	sharedScope    bool // WithSharedScope
	fingerprint    func(*http.Request, []byte) (string, error)
	storePolicy    func(*http.Request, int, http.Header) bool
	lease          time.Duration
	retention      time.Duration
	maxRequest     int64
	maxResponse    int
	replayHeaders  map[string]bool
	failOpen       bool
	wait           time.Duration
	abandonOnPanic bool
	storeTimeout   time.Duration
	logger         *slog.Logger
	meterProvider  metric.MeterProvider // nil: the global provider
	instance       string               // WithInstance
}

// DefaultReplayHeaders are the response headers stored and replayed unless [WithReplayHeaders] says
// otherwise. Headers outside the list (Set-Cookie, Date, per-request tracing headers) are neither
// stored nor replayed. Retry-After is replayed as it was sent (a delay in seconds is not shortened by
// the time since).
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Language", "Content-Encoding", "Content-Location", "Location",
	"ETag", "Last-Modified", "Cache-Control", "Retry-After",
}

// Defaults of [WithClaimLease] and [WithRetention].
const (
	DefaultClaimLease = 30 * time.Second
	DefaultRetention  = 24 * time.Hour
)

func defaultConfig() config {
	c := config{
		required:     func(*http.Request) bool { return false },
		fingerprint:  DefaultFingerprint,
		storePolicy:  DefaultStorePolicy,
		lease:        DefaultClaimLease,
		retention:    DefaultRetention,
		maxRequest:   1 << 20,
		maxResponse:  1 << 20,
		storeTimeout: 5 * time.Second,
		logger:       slog.Default(),
	}
	c.replayHeaders = canonicalSet(DefaultReplayHeaders)
	return c
}

func canonicalSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[http.CanonicalHeaderKey(n)] = true
	}
	return m
}

// WithRequired decides per request whether the Idempotency-Key header is required: when fn returns
// true and the header is missing, the middleware answers 400 without calling the handler. When it
// returns false, a request without the header passes straight to the handler. Default (or nil):
// never required. For example, require it for POST only: func(r *http.Request) bool { return r.Method ==
// http.MethodPost }.
func WithRequired(fn func(r *http.Request) bool) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			fn = func(*http.Request) bool { return false }
		}
		c.required = fn
		return nil
	})
}

// WithScope sets the function that names the caller (tenant, user, API client) of a request, so two
// callers that pick the same idempotency key never see each other's responses. It runs for every
// request carrying an Idempotency-Key, after the handlers wrapping the middleware (put authentication
// outside it) and after the body was read. Keys are further scoped by method and path; an empty scope
// is valid (the shared scope). When fn returns an error, the middleware logs it and answers 500
// without claiming the key or calling the handler, even with [WithFailOpen] (which covers store
// outages, not a request that cannot be scoped). Reject unauthenticated requests before the
// middleware, so that an error here means a bug or a misconfiguration, as with ratelimithttp.WithKey.
// There is no default: [New] fails unless WithScope or [WithSharedScope](true) is given, so that a
// response is never replayed to another caller by accident. A nil fn is as if WithScope were omitted.
func WithScope(fn func(r *http.Request) (string, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return nil
		}
		c.scope, c.sharedScope = fn, false
		return nil
	})
}

// WithSharedScope makes every caller share one scope when on is true: a request replays the response of
// any earlier request with the same idempotency key, method and path, whoever sent it. Use it only
// when keys cannot collide between callers (one caller, or keys the server issues); otherwise use
// [WithScope]. [New] requires one of the two; the later one wins, and WithSharedScope(false) leaves
// an earlier WithScope in place. Default: off (false).
func WithSharedScope(on bool) Option {
	return optionFunc(func(c *config) error {
		c.sharedScope = on
		if on {
			c.scope = nil
		}
		return nil
	})
}

// sharedScope is the scope of [WithSharedScope]: the empty scope for every request.
func sharedScope(*http.Request) (string, error) { return "", nil }

// WithClaimLease sets the lease of a pending claim (whole milliseconds, at least 1ms): the claim is
// renewed every lease/3 while the handler runs ([idempotency.Claim.KeepAlive]), so a handler may run
// longer than the lease, and a claim whose instance crashed (or whose handler panicked) frees the key
// for a retry after at most the lease. Shorter leases free a crashed request sooner and cost more
// renewals (one round trip per lease/3 per running request). Default: [DefaultClaimLease] (30s: a
// crashed request is retried within a minute, while a renewal every 10s costs little and tolerates
// seconds-long server or network hiccups before the claim is lost).
func WithClaimLease(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Millisecond {
			return luakit.InvalidConfig("idemhttp", "claim lease %v must be at least 1ms", d)
		}
		c.lease = d
		return nil
	})
}

// WithRetention sets how long a stored response is replayed to duplicates (whole milliseconds, at
// least 1ms), counted from when it is stored. Choose it longer than the clients' retry window.
// Default: [DefaultRetention] (24h, the IETF draft's typical window).
func WithRetention(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Millisecond {
			return luakit.InvalidConfig("idemhttp", "retention %v must be at least 1ms", d)
		}
		c.retention = d
		return nil
	})
}

// WithStorePolicy sets the function that decides, for each final response of the handler, whether it
// is stored and replayed to duplicates (true) or not (false: the response is served, and the claim is
// abandoned as soon as the handler returns, so the client's retry runs the handler again). It gets the
// request, the status code and the response header as the handler sent them. It runs in the
// handler's goroutine after the handler returns; a response the handler marked with [DoNotStore] is
// never stored, whatever it returns. Default (or nil): [DefaultStorePolicy].
func WithStorePolicy(fn func(r *http.Request, status int, header http.Header) bool) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			fn = DefaultStorePolicy
		}
		c.storePolicy = fn
		return nil
	})
}

// DefaultStorePolicy stores every final response except 429 Too Many Requests and 503 Service
// Unavailable: those tell the client to retry later, so storing them would replay "retry later" for
// the whole retention even after the cause has passed. Every other response is stored, 5xx included,
// as payment APIs do: a request whose outcome the server already decided (a 500 after a partial side
// effect) must not run again.
func DefaultStorePolicy(_ *http.Request, status int, _ http.Header) bool {
	return status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable
}

// WithFingerprint sets the function that computes the digest of what makes two requests with one key
// "the same" (a different digest is answered 422). It gets the request (its body already replaced by
// an in-memory copy) and the body bytes (at most [WithMaxRequestBody]). Return a short deterministic
// digest, for example the hex SHA-256 of a canonical JSON encoding of the fields that matter, so that
// a retry with reordered JSON fields is still the same request. When it returns an error the
// middleware answers 400 without claiming the key or calling the handler (the usual cause is a body
// the function cannot parse) and logs the error at info level. Default (or nil): [DefaultFingerprint].
func WithFingerprint(fn func(r *http.Request, body []byte) (string, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			fn = DefaultFingerprint
		}
		c.fingerprint = fn
		return nil
	})
}

// WithMaxRequestBody bounds the request body read for the fingerprint, in bytes (>= 0). A keyed
// request with a larger body is answered 413 without claiming the key or calling the handler.
// Default: 1 MiB.
func WithMaxRequestBody(n int64) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return luakit.InvalidConfig("idemhttp", "max request body %d is negative", n)
		}
		c.maxRequest = n
		return nil
	})
}

// WithMaxStoredResponse bounds the response body stored for replay, in bytes (>= 0). A larger response
// is still served to the original caller but is not stored, and its claim is left pending until its
// lease ends (duplicates get 409 meanwhile, then run the handler again). Default: 1 MiB.
func WithMaxStoredResponse(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return luakit.InvalidConfig("idemhttp", "max stored response %d is negative", n)
		}
		c.maxResponse = n
		return nil
	})
}

// WithReplayHeaders replaces the allow-list of response header names stored and replayed (case-
// insensitive). Default: [DefaultReplayHeaders].
func WithReplayHeaders(names ...string) Option {
	return optionFunc(func(c *config) error {
		c.replayHeaders = canonicalSet(names)
		return nil
	})
}

// WithFailOpen makes the middleware call the handler without idempotency protection when the store
// fails (connection error, uncertain outcome, server error) instead of answering 503. Fail-open can
// run a duplicate; use it only for handlers whose duplicates are harmless. Default: fail closed (503
// with Retry-After: 1).
func WithFailOpen(open bool) Option {
	return optionFunc(func(c *config) error {
		c.failOpen = open
		return nil
	})
}

// WithWait makes a duplicate of an in-flight request wait up to d for the original's response
// ([idempotency.Store.Begin]) instead of getting 409 at once; after d it gets 409. If the original's
// claim disappears meanwhile (abandoned or expired), the duplicate runs the handler itself. Waiting
// wakes on invalidations when the Store's client has a tracker (see [idempotency.Store.Begin]);
// otherwise only when the original's claim lease would end, up to one claim lease after its response
// was stored. d must be >= 0. Default: 0 (no wait).
func WithWait(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return luakit.InvalidConfig("idemhttp", "wait %v is negative", d)
		}
		c.wait = d
		return nil
	})
}

// WithAbandonOnPanic declares that the wrapped handlers have no side effect when they panic before
// writing any part of the response. Then, and only then, a panicking handler's claim is abandoned so
// a retry can run the handler again. Otherwise (the default) the middleware cannot know whether a side
// effect happened, so the claim stays pending until its lease ends and duplicates get 409. In both cases
// the panic is re-raised after the cleanup. Default: false.
func WithAbandonOnPanic(sideEffectFree bool) Option {
	return optionFunc(func(c *config) error {
		c.abandonOnPanic = sideEffectFree
		return nil
	})
}

// WithStoreTimeout bounds the Complete or Abandon call made after the handler returns; it runs even
// if the client has gone away. It must be positive. Default: 5s.
func WithStoreTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("idemhttp", "store timeout %v must be positive", d)
		}
		c.storeTimeout = d
		return nil
	})
}

// WithLogger sets the logger for store failures and lost claims. Keys, owner tokens and bodies are
// never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	})
}

// WithMeterProvider sets the OpenTelemetry meter provider of the [MetricOutcomes] counter. Default
// (or nil): the global provider, otel.GetMeterProvider(), looked up by [New].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		c.meterProvider = mp
		return nil
	})
}

// WithInstance labels the middleware in its metrics: the attribute coordkit.instance on
// [MetricOutcomes] (omitted when name is ""). It must not be a key or a scope. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error {
		c.instance = instance
		return nil
	})
}

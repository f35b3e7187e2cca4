package idemhttp

import (
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
	ttl            time.Duration
	maxRequest     int64
	maxResponse    int
	replayHeaders  map[string]bool
	failOpen       bool
	wait           time.Duration
	abandonOnPanic bool
	storeTimeout   time.Duration
	logger         *slog.Logger
}

// DefaultReplayHeaders are the response headers stored and replayed unless [WithReplayHeaders] says
// otherwise. Headers outside the list (Set-Cookie, Date, per-request tracing headers) are neither
// stored nor replayed.
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Language", "Content-Encoding", "Content-Location", "Location",
	"ETag", "Last-Modified", "Cache-Control",
}

func defaultConfig() config {
	c := config{
		required:     func(*http.Request) bool { return false },
		scope:        func(*http.Request) (string, error) { return "", nil },
		ttl:          24 * time.Hour,
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
// returns false, a request without the header passes straight to the handler. Default: never
// required. For example, require it for POST only: func(r *http.Request) bool { return r.Method ==
// http.MethodPost }.
func WithRequired(fn func(r *http.Request) bool) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return luakit.InvalidConfig("idemhttp", "nil required func")
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
// Default: every caller shares one scope ("").
func WithScope(fn func(r *http.Request) (string, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return luakit.InvalidConfig("idemhttp", "nil scope func")
		}
		c.scope = fn
		return nil
	})
}

// WithTTL sets how long a claim may stay pending and how long a stored response is replayed (whole
// milliseconds, at least 1ms). Choose it longer than the handler's run time plus the clients' retry
// window. Default: 24h.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Millisecond {
			return luakit.InvalidConfig("idemhttp", "ttl %v must be at least 1ms", d)
		}
		c.ttl = d
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
// is still served to the original caller but is not stored, and its claim is left pending until the
// TTL ends (duplicates get 409 meanwhile, then run the handler again). Default: 1 MiB.
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
// wakes on invalidations when the Store has a tracker. d must be >= 0. Default: 0 (no wait).
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
// effect happened, so the claim stays pending until the TTL ends and duplicates get 409. In both cases
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
// never logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return luakit.InvalidConfig("idemhttp", "nil logger")
		}
		c.logger = l
		return nil
	})
}

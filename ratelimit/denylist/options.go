package denylist

import (
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Defaults and bounds of the options.
const (
	// DefaultCacheDuration is how long a [List] caches a membership unless [WithCacheDuration] says
	// otherwise.
	DefaultCacheDuration = time.Second
	// MaxCacheDuration is the longest cache duration [WithCacheDuration] accepts.
	MaxCacheDuration = time.Minute
	// DefaultCacheCapacity is how many identities a [List] caches unless [WithCacheCapacity] says
	// otherwise.
	DefaultCacheCapacity = 1024
	// DefaultReadTimeout bounds a shared membership read unless [WithReadTimeout] says otherwise.
	DefaultReadTimeout = 5 * time.Second
)

// Option configures a [List] built by [New]. Options are applied in order; an invalid value makes
// New fail with an error matching [ErrInvalidConfig]. A nil Option is skipped.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	cacheDuration time.Duration
	cacheCapacity int
	readTimeout   time.Duration
	keys          luakit.Keyspace
	now           func() time.Time // the local clock; replaced in unit tests
	hooks         luakit.Hooks     // WithHooks
	instance      string           // WithInstance
}

func defaultConfig() config {
	return config{
		cacheDuration: DefaultCacheDuration,
		cacheCapacity: DefaultCacheCapacity,
		readTimeout:   DefaultReadTimeout,
		now:           time.Now,
	}
}

// WithCacheDuration sets how long a [List] caches a membership read, counted from the start of the
// read (at nanosecond precision: no rounding). d must be between 0 and [MaxCacheDuration] (1 minute);
// 0 disables the cache and read sharing, so every [List.IsDenied] reads the server. Default:
// [DefaultCacheDuration] (1 second).
func WithCacheDuration(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 || d > MaxCacheDuration {
			return luakit.InvalidConfig("ratelimit", "deny-list cache duration %v must be between 0 and %v", d, MaxCacheDuration)
		}
		c.cacheDuration = d
		return nil
	})
}

// WithCacheCapacity sets how many identities a [List] caches at most, which also bounds the number
// of shared reads in flight. n must be positive; use [WithCacheDuration](0) to disable the cache.
// Default: [DefaultCacheCapacity] (1024).
func WithCacheCapacity(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return luakit.InvalidConfig("ratelimit", "deny-list cache capacity %d must be positive", n)
		}
		c.cacheCapacity = n
		return nil
	})
}

// WithKeyPrefix prepends prefix to the deny list's key, like a prefixed client view. The prefix is
// binary-safe; [List.Key] returns the key without it. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithReadTimeout bounds a shared membership read: the read runs detached from its callers (so that
// one caller's cancellation cannot fail the others) and gives up after d; its waiters then get an
// error. Callers with a shorter deadline stop waiting at their own deadline. Reads that are not
// shared (cache disabled, or the in-flight bound reached) use the caller's context instead. d must be
// positive. Default: [DefaultReadTimeout] (5 seconds).
func WithReadTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("ratelimit", "deny-list read timeout %v must be positive", d)
		}
		c.readTimeout = d
		return nil
	})
}

// WithHooks adds hooks that admit and observe the calls made on the [List] directly (see
// [luakit.Hook]; primitive "ratelimit"): RATE LIMIT DENY LIST READ, RATE LIMIT DENY LIST WRITE and
// RATE LIMIT DENY LIST INSPECT for [List.IsDenied], [List.SetDenied] and [List.Inspect]. The checks a
// bound limiter makes are part of the limiter's call and create no scope here. Close, Key, Stats and
// Invalidate are not operations. Hooks compose in order across calls. Default: none.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error {
		c.hooks = append(c.hooks, hooks...)
		return nil
	})
}

// WithInstance labels the deny list in its hooks ([luakit.Operation].Instance). It must not be a
// key, an identity or a token. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error {
		c.instance = instance
		return nil
	})
}

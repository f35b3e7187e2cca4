package counter

import (
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Store]. Options are applied in order by [New]; an invalid value makes New fail
// with an error matching [ErrInvalidConfig]. nil options are ignored.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys          luakit.Keyspace
	probeInterval time.Duration
	probeTimeout  time.Duration
	logger        *slog.Logger
	hooks         luakit.Hooks
	instance      string
}

func defaultConfig() config {
	return config{
		probeInterval: 100 * time.Millisecond,
		probeTimeout:  time.Second,
		logger:        slog.Default(),
	}
}

// WithKeyPrefix prepends prefix to every physical key, like a prefixed client view. The prefix is
// binary-safe. On Cluster a prefix containing a hash tag ({...}) puts every counter in that tag's
// slot. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithProbeInterval sets how often, while the store is disconnected, a background probe tries to
// reach the server (one cheap PTTL of the failed call's key per probe, a command every operation already needs). It must be positive. Default: 100ms. Lower values
// notice a reconnect sooner at the cost of more dial attempts against a down server.
func WithProbeInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("counter", "probe interval %v must be positive", d)
		}
		c.probeInterval = d
		return nil
	})
}

// WithProbeTimeout bounds each background probe and the PTTL before a store's first call. It must be
// positive. Default: 1s.
func WithProbeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("counter", "probe timeout %v must be positive", d)
		}
		c.probeTimeout = d
		return nil
	})
}

// WithLogger sets the logger for connectivity changes and, for the [Buffered] counters of the store,
// failed background flushes (see [WithFlushErrorHandler]). Keys are never logged. Default (or nil):
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

// BoundedOption configures a [Bounded]. Options are applied in order by [NewBounded]; an invalid
// value makes NewBounded fail with an error matching [ErrInvalidConfig]. nil options are ignored. A
// BoundedOption is not an [Option] or a [BufferedOption]: the compiler rejects one given to another
// constructor.
type BoundedOption interface {
	apply(*boundedConfig) error
}

type boundedOptionFunc func(*boundedConfig) error

func (f boundedOptionFunc) apply(c *boundedConfig) error { return f(c) }

type boundedConfig struct {
	chunk  int64 // 0: max(1, limit/100)
	window time.Duration
}

// WithChunk sets how much headroom one reservation takes from the global counter. Larger chunks mean
// fewer round trips and more headroom held, unused, by this process (and lost to the limit if it
// crashes). Near the limit a reservation shrinks to what is left. It must be at least 1. Default:
// max(1, limit/100).
func WithChunk(n int64) BoundedOption {
	return boundedOptionFunc(func(c *boundedConfig) error {
		if n < 1 {
			return luakit.InvalidConfig("counter", "chunk %d must be at least 1", n)
		}
		c.chunk = n
		return nil
	})
}

// WithWindow makes a counter that a reservation creates expire after ttl: a fixed window, passed to
// [Store.IncrementUpTo] as its ttl (later reservations never extend it). It must be 0 or at least
// 1ms (else the error also matches [ErrInvalidTTL]); it is truncated to whole milliseconds.
// Default: 0, no expiry.
func WithWindow(ttl time.Duration) BoundedOption {
	return boundedOptionFunc(func(c *boundedConfig) error {
		if err := checkTTL("window", ttl); err != nil {
			return err
		}
		c.window = ttl
		return nil
	})
}

// BufferedOption configures a [Buffered]. Options are applied in order by [NewBuffered]; an invalid
// value makes NewBuffered fail with an error matching [ErrInvalidConfig]. nil options are ignored. A
// BufferedOption is not an [Option] or a [BoundedOption]: the compiler rejects one given to another
// constructor.
type BufferedOption interface {
	apply(*bufferedConfig) error
}

type bufferedOptionFunc func(*bufferedConfig) error

func (f bufferedOptionFunc) apply(c *bufferedConfig) error { return f(c) }

type bufferedConfig struct {
	flushInterval time.Duration
	flushTimeout  time.Duration
	ttl           time.Duration
	onError       func(error) // nil: the store's logger
}

func defaultBufferedConfig() bufferedConfig {
	return bufferedConfig{flushInterval: time.Second, flushTimeout: 5 * time.Second}
}

// WithFlushInterval sets how often the background goroutine flushes the pending delta, which bounds
// the deltas a crash can lose. It must be positive. Default: 1s.
func WithFlushInterval(d time.Duration) BufferedOption {
	return bufferedOptionFunc(func(c *bufferedConfig) error {
		if d <= 0 {
			return luakit.InvalidConfig("counter", "flush interval %v must be positive", d)
		}
		c.flushInterval = d
		return nil
	})
}

// WithFlushTimeout bounds each background flush's round trip. It must be positive. Default: 5s.
func WithFlushTimeout(d time.Duration) BufferedOption {
	return bufferedOptionFunc(func(c *bufferedConfig) error {
		if d <= 0 {
			return luakit.InvalidConfig("counter", "flush timeout %v must be positive", d)
		}
		c.flushTimeout = d
		return nil
	})
}

// WithFlushTTL sets the counter's expiry to ttl at every flush: a sliding expiry, passed to
// [Store.IncrementWithExpire] as its ttl. It must be 0 or at least 1ms (else the error also matches
// [ErrInvalidTTL]); it is truncated to whole milliseconds. Default: 0, the expiry is left unchanged.
func WithFlushTTL(ttl time.Duration) BufferedOption {
	return bufferedOptionFunc(func(c *bufferedConfig) error {
		if err := checkTTL("flush ttl", ttl); err != nil {
			return err
		}
		c.ttl = ttl
		return nil
	})
}

// WithFlushErrorHandler sets the function called with the error of every failed background flush,
// from the flushing goroutine (a slow handler delays the next flush and Close). Errors of
// [Buffered.Flush] and [Buffered.Close] are returned to their caller instead. Default (or nil): a
// warning on the store's logger ([WithLogger]).
func WithFlushErrorHandler(fn func(error)) BufferedOption {
	return bufferedOptionFunc(func(c *bufferedConfig) error {
		c.onError = fn
		return nil
	})
}

// WithHooks adds hooks that admit and observe the Store's operations (see [luakit.Hook]): COUNTER
// INCREMENT WITH EXPIRE, COUNTER INCREMENT UP TO, COUNTER DECREMENT DOWN TO, COUNTER GET, COUNTER GET
// MANY, COUNTER BATCH INCREMENT and COUNTER INSPECT, once per call. A Bounded or Buffered counter's
// flushes are the Store operations they send. Hooks compose in order across calls. Default: none.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil })
}

// WithInstance labels the Store for hooks ([luakit.Operation].Instance). It must not be a key. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.instance = instance; return nil })
}

package ratelimit

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Limiter] ([New]) or a [Keyed] ([NewKeyed]). Options are applied in order;
// an invalid value, or an option that does not apply to the constructor, makes it fail. A nil Option
// is ignored.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys          luakit.Keyspace
	queueLimit    int64
	queueOrder    QueueOrder
	meterProvider metric.MeterProvider

	denyList    *DenyList
	identity    string              // New only
	identityFor func(string) string // NewKeyed only
	keyedDeny   bool                // WithKeyedDenyList was given

	maxKeys     int           // NewKeyed only
	idleTimeout time.Duration // NewKeyed only

	updateTimeout time.Duration
}

// DefaultUpdateTimeout is the default of [WithUpdateTimeout].
const DefaultUpdateTimeout = 10 * time.Second

func defaultConfig() config {
	return config{maxKeys: 10000, idleTimeout: time.Minute, updateTimeout: DefaultUpdateTimeout}
}

// WithKeyPrefix prepends prefix to the limiter's key (to every key of a [Keyed]), like a prefixed
// client view. The prefix is binary-safe. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithQueue enables the local wait queue used by [Limiter.WaitN]: up to limit permits (summed over
// waiting requests) may wait, served in order. limit must not be negative. Default: 0, no queue (WaitN
// then decides once, like AllowN). The queue is local to this instance: other processes, and new
// local callers between retries, can take permits first.
func WithQueue(limit int64, order QueueOrder) Option {
	return optionFunc(func(c *config) error {
		if limit < 0 {
			return fmt.Errorf("ratelimit: queue limit %d must not be negative", limit)
		}
		if order != OldestFirst && order != NewestFirst {
			return fmt.Errorf("ratelimit: unknown queue order %d", order)
		}
		c.queueLimit, c.queueOrder = limit, order
		return nil
	})
}

// WithMeterProvider sets the OpenTelemetry meter provider for the coordkit.rate_limit.allowed and
// coordkit.rate_limit.blocked counters. A nil mp is an error. Default: the global provider,
// otel.GetMeterProvider(), looked up by the constructor.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		if mp == nil {
			return fmt.Errorf("ratelimit: nil meter provider")
		}
		c.meterProvider = mp
		return nil
	})
}

// WithDenyList binds the limiter built by [New] to identity on dl: while identity is denied, every
// decision (including n = 0 probes) is a rejection with [ReasonDenyList], without touching the
// capacity key or entering the queue. identity must not be empty. Not valid for [NewKeyed]; use
// [WithKeyedDenyList].
func WithDenyList(dl *DenyList, identity string) Option {
	return optionFunc(func(c *config) error {
		if dl == nil {
			return fmt.Errorf("ratelimit: nil deny list")
		}
		if identity == "" {
			return ErrEmptyIdentity
		}
		c.denyList, c.identity = dl, identity
		return nil
	})
}

// WithKeyedDenyList binds a [Keyed] limiter to dl: the identity checked for a key is identity(key),
// or the key itself when identity is nil. An empty identity is an error of that call. Not valid for
// [New]; use [WithDenyList].
func WithKeyedDenyList(dl *DenyList, identity func(key string) string) Option {
	return optionFunc(func(c *config) error {
		if dl == nil {
			return fmt.Errorf("ratelimit: nil deny list")
		}
		if identity == nil {
			identity = func(k string) string { return k }
		}
		c.denyList, c.identityFor, c.keyedDeny = dl, identity, true
		return nil
	})
}

// WithMaxKeys bounds how many keys of a [Keyed] keep local state (a queue and statistics) at once.
// When the bound is reached, the key idle for longest is evicted first; a key with waiting requests is
// never evicted, and a new key that finds no room is served without local state (no queue). n must be
// positive. Default: 10000. Not valid for [New].
func WithMaxKeys(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("ratelimit: max keys %d must be positive", n)
		}
		c.maxKeys = n
		return nil
	})
}

// WithIdleTimeout sets how long a key of a [Keyed] keeps its local state at least after its last
// request (a background sweep every d/2, clamped to 10ms..1 minute, drops it). d must be positive.
// Default: 1 minute. Not valid for [New].
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("ratelimit: idle timeout %v must be positive", d)
		}
		c.idleTimeout = d
		return nil
	})
}

// WithUpdateTimeout bounds how long [Limiter.Update] waits for the reply of a migration script once it
// has been sent. The caller's ctx no longer applies at that point (the seed's rule: an update observes
// the outcome of a submitted migration), so this is the only bound; when it passes, the outcome is
// uncertain and the limiter closes. d must be positive. Default: [DefaultUpdateTimeout] (10s).
func WithUpdateTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("ratelimit: update timeout %v must be positive", d)
		}
		c.updateTimeout = d
		return nil
	})
}

func (c *config) provider() metric.MeterProvider {
	if c.meterProvider != nil {
		return c.meterProvider
	}
	return otel.GetMeterProvider()
}

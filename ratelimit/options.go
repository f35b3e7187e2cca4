package ratelimit

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
	"github.com/coordkit/coordkit/ratelimit/internal/denyaccess"
)

// Option configures a [Limiter] built by [New]; [KeyedOption] configures a [Keyed] built by
// [NewKeyed]. Each constructor takes its own type, so an option of one constructor given to the other
// does not compile. The options that configure both ([WithKeyPrefix], [WithQueue],
// [WithMeterProvider], [WithHooks], [WithInstance]) return a [SharedOption], which is both. Options
// are applied in order; an invalid value makes the constructor fail with an error matching
// [ErrInvalidConfig]. A nil option is skipped.
type Option interface {
	applyLimiter(*config) error
}

// KeyedOption configures a [Keyed] built by [NewKeyed]; see [Option].
type KeyedOption interface {
	applyKeyed(*config) error
}

// SharedOption is an option of both [New] and [NewKeyed]: it is an [Option] and a [KeyedOption].
type SharedOption interface {
	Option
	KeyedOption
}

// limiterOption is an Option of New only.
type limiterOption func(*config) error

func (f limiterOption) applyLimiter(c *config) error { return f(c) }

// keyedOption is a KeyedOption of NewKeyed only.
type keyedOption func(*config) error

func (f keyedOption) applyKeyed(c *config) error { return f(c) }

// sharedOption is an option of both constructors.
type sharedOption func(*config) error

func (f sharedOption) applyLimiter(c *config) error { return f(c) }
func (f sharedOption) applyKeyed(c *config) error   { return f(c) }

type config struct {
	keys          luakit.Keyspace
	queueLimit    int64
	queueOrder    QueueOrder
	meterProvider metric.MeterProvider

	deny        denyFunc            // WithDenyList, WithKeyedDenyList
	identity    string              // New only
	identityFor func(string) string // NewKeyed only

	maxKeys       int           // NewKeyed only
	idleTimeout   time.Duration // NewKeyed only
	policyVersion int64         // NewKeyed only

	updateTimeout time.Duration

	hooks    luakit.Hooks // WithHooks
	instance string       // WithInstance
}

// DefaultUpdateTimeout is the default of [WithUpdateTimeout].
const DefaultUpdateTimeout = 10 * time.Second

func defaultConfig() config {
	return config{maxKeys: 10000, idleTimeout: time.Minute, updateTimeout: DefaultUpdateTimeout}
}

// WithKeyPrefix prepends prefix to the limiter's key (to every key of a [Keyed]), like a prefixed
// client view. The prefix is binary-safe; [Limiter.Key] returns the key without it. Default: no
// prefix.
func WithKeyPrefix(prefix string) SharedOption {
	return sharedOption(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithQueue enables the local wait queue of [Limiter.WaitN] (of [Keyed.WaitN]: one queue per key):
// up to limit permits (summed over waiting requests) wait, served one at a time in order; while
// requests wait, a new WaitN joins the queue instead of deciding first. A full queue rejects the new
// request ([OldestFirst]) or evicts the oldest waiters ([NewestFirst]) with [ErrQueueFull]. A queued
// request rechecks the deny list before every retry. The queue is local to this instance: other
// processes, and local callers between retries, can take permits first. limit must not be negative
// and order must be OldestFirst or NewestFirst. Default: 0, no queue (WaitN then sleeps each
// rejection's RetryAfter and decides again, with no local state).
func WithQueue(limit int64, order QueueOrder) SharedOption {
	return sharedOption(func(c *config) error {
		if limit < 0 {
			return luakit.InvalidConfig("ratelimit", "queue limit %d must not be negative", limit)
		}
		if order != OldestFirst && order != NewestFirst {
			return luakit.InvalidConfig("ratelimit", "unknown queue order %v", order)
		}
		c.queueLimit, c.queueOrder = limit, order
		return nil
	})
}

// WithMeterProvider sets the OpenTelemetry meter provider for the coordkit.rate_limit.allowed and
// coordkit.rate_limit.blocked counters. Default (also for a nil mp): the global provider,
// otel.GetMeterProvider(), looked up by the constructor.
func WithMeterProvider(mp metric.MeterProvider) SharedOption {
	return sharedOption(func(c *config) error {
		c.meterProvider = mp
		return nil
	})
}

// WithDenyList binds the limiter built by [New] to identity on dl: while identity is denied, every
// decision (including n = 0 probes) is a rejection with [ReasonDenyList], without touching the
// capacity key or entering the queue. identity must not be empty ([ErrEmptyIdentity]). A nil dl
// binds no deny list, as if the option were omitted. For [NewKeyed], use [WithKeyedDenyList].
func WithDenyList(dl *denylist.List, identity string) Option {
	return limiterOption(func(c *config) error {
		if dl == nil {
			return nil
		}
		if identity == "" {
			return ErrEmptyIdentity
		}
		c.deny, c.identity = denyFuncOf(dl), identity
		return nil
	})
}

// WithKeyedDenyList binds a [Keyed] limiter to dl: the identity checked for a key is identity(key),
// or the key itself when identity is nil. An empty identity is an error of that call
// ([ErrEmptyIdentity]). A nil dl binds no deny list, as if the option were omitted. For [New], use
// [WithDenyList].
func WithKeyedDenyList(dl *denylist.List, identity func(key string) string) KeyedOption {
	return keyedOption(func(c *config) error {
		if dl == nil {
			return nil
		}
		if identity == nil {
			identity = func(k string) string { return k }
		}
		c.deny, c.identityFor = denyFuncOf(dl), identity
		return nil
	})
}

// denyFunc asks a deny list whether identity is denied, without the list's own hooks (the check is
// part of the limiter's admitted call).
type denyFunc func(ctx context.Context, identity string) (bool, error)

func denyFuncOf(dl *denylist.List) denyFunc {
	return func(ctx context.Context, identity string) (bool, error) {
		return denyaccess.IsDenied(ctx, dl, identity)
	}
}

// WithMaxKeys bounds how many keys of a [Keyed] keep local state (a queue and statistics) at once.
// When the bound is reached, the key idle for longest is evicted first; a key with waiting requests is
// never evicted, and a new key that finds no room is served without local state (no queue). n must be
// positive. Default: 10000.
func WithMaxKeys(n int) KeyedOption {
	return keyedOption(func(c *config) error {
		if n <= 0 {
			return luakit.InvalidConfig("ratelimit", "max keys %d must be positive", n)
		}
		c.maxKeys = n
		return nil
	})
}

// WithIdleTimeout sets how long a key of a [Keyed] keeps its local state at least after its last
// request (a background sweep every d/2, clamped to 10ms..1 minute, drops it). d must be positive.
// Default: 1 minute.
func WithIdleTimeout(d time.Duration) KeyedOption {
	return keyedOption(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("ratelimit", "idle timeout %v must be positive", d)
		}
		c.idleTimeout = d
		return nil
	})
}

// MaxPolicyVersion is the largest version [WithPolicyVersion] accepts (versions are exact in the
// server's script numbers up to 2^53).
const MaxPolicyVersion = 1 << 50

// WithPolicyVersion sets the version of the policy given to [NewKeyed] (each [Keyed.SetPolicy] raises
// it by one). Keys record the version of the settings that wrote them: a Keyed deciding a key stored
// with a higher version applies the stored settings instead of converting the key back (see
// [Keyed.SetPolicy]). Give a changed policy a higher version than the one it replaces. v must not be
// negative nor above [MaxPolicyVersion]. Default: 0.
func WithPolicyVersion(v int64) KeyedOption {
	return keyedOption(func(c *config) error {
		if v < 0 || v > MaxPolicyVersion {
			return luakit.InvalidConfig("ratelimit", "policy version %d, want 0 to %d", v, MaxPolicyVersion)
		}
		c.policyVersion = v
		return nil
	})
}

// WithUpdateTimeout bounds how long [Limiter.Update] waits for the reply of a migration script once it
// has been sent. The caller's ctx no longer applies at that point (an update always observes the
// outcome of a migration it submitted, so that the limiter never guesses which settings the server
// holds), so this is the only bound; when it passes, the outcome is uncertain and the limiter closes.
// d must be positive. Default: [DefaultUpdateTimeout] (10s). [Keyed.SetPolicy] does no I/O, so it has
// no such option.
func WithUpdateTimeout(d time.Duration) Option {
	return limiterOption(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("ratelimit", "update timeout %v must be positive", d)
		}
		c.updateTimeout = d
		return nil
	})
}

// applyOptions applies the options of New to the default configuration.
func applyOptions(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyLimiter(&cfg); err != nil {
			return config{}, err
		}
	}
	return cfg, nil
}

// applyKeyedOptions applies the options of NewKeyed to the default configuration.
func applyKeyedOptions(opts []KeyedOption) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyKeyed(&cfg); err != nil {
			return config{}, err
		}
	}
	return cfg, nil
}

func (c *config) provider() metric.MeterProvider {
	if c.meterProvider != nil {
		return c.meterProvider
	}
	return otel.GetMeterProvider()
}

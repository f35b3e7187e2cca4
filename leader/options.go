package leader

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures an [Election]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// Defaults of the options.
const (
	// DefaultLeaseDuration is the lease duration used without [WithLeaseDuration].
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRetryDelay is the retry delay used without [WithRetryDelay].
	DefaultRetryDelay = time.Second
	// DefaultCleanupTimeout bounds the release sent when a term ends (see [WithCleanupTimeout]).
	DefaultCleanupTimeout = time.Second
	// DefaultRecoveryBudget is the connection-recovery budget used without [WithRecoveryBudget]: two
	// minutes outlasts a routine outage (a Sentinel failover with its default 30s down-after period and
	// the failover itself, a Cluster failover after its default 15s node timeout, a server restart),
	// yet a candidate that cannot reach its server for longer (a wrong address, a server gone for
	// good, a network that will not heal) tells its caller instead of campaigning in silence for ever.
	DefaultRecoveryBudget = 2 * time.Minute
)

type config struct {
	prefix         string
	leaseKey       string // WithKeys; "" for the keys derived from the name
	fenceKey       string
	strictSlots    bool
	tracker        *luakit.Tracker
	lease          time.Duration
	retryDelay     time.Duration
	margin         time.Duration // < 0: default (lease/10)
	cleanupTimeout time.Duration
	recovery       time.Duration
	logger         *slog.Logger
	meterProvider  metric.MeterProvider
	onElected      func(ctx context.Context, term Term) error
	onRevoked      func(term Term)
	observers      []func(Change)
	hooks          luakit.Hooks
	instance       string
	ack            luakit.ReplicaAck // WithReplicaAck
}

func defaultConfig() config {
	return config{
		lease:          DefaultLeaseDuration,
		retryDelay:     DefaultRetryDelay,
		margin:         -1,
		cleanupTimeout: DefaultCleanupTimeout,
		recovery:       DefaultRecoveryBudget,
		logger:         slog.Default(),
	}
}

func (c *config) provider() metric.MeterProvider {
	if c.meterProvider != nil {
		return c.meterProvider
	}
	return otel.GetMeterProvider()
}

// safetyMargin returns the configured margin or the default, a tenth of the lease.
func (c *config) safetyMargin() time.Duration {
	if c.margin >= 0 {
		return c.margin
	}
	return c.lease / 10
}

// WithLeaseDuration sets the lease duration: how long the server keeps a leader's lease after its last
// renewal, truncated to whole milliseconds. The leader renews at half of it. It must be at least 10ms.
// Default: [DefaultLeaseDuration] (15s). A dead leader is replaced within about this duration plus the
// retry delay.
func WithLeaseDuration(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 10*time.Millisecond {
			return luakit.InvalidConfig("leader", "lease duration %v is under 10ms", d)
		}
		c.lease = d.Truncate(time.Millisecond)
		return nil
	})
}

// WithRetryDelay sets how long the election waits before retrying after a transient failure
// (acquisition or renewal: LOADING, BUSY, CLUSTERDOWN, TRYAGAIN, MASTERDOWN, READONLY, a broken
// connection) and before campaigning again after the elected callback relinquished leadership. It must be
// positive. Default: [DefaultRetryDelay] (1s).
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("leader", "retry delay %v must be positive", d)
		}
		c.retryDelay = d
		return nil
	})
}

// WithSafetyMargin sets the self-fencing margin: a leader whose renewal has not been confirmed revokes
// its term at the lease's local deadline minus d, so that its work is told to stop before the server can
// expire the lease and elect someone else. It must be at least 0 and under half the lease duration
// (checked by [New]). Default: a tenth of the lease duration.
func WithSafetyMargin(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return luakit.InvalidConfig("leader", "safety margin %v is negative", d)
		}
		c.margin = d
		return nil
	})
}

// WithCleanupTimeout bounds the owner-checked release sent when a term ends (it runs even after the
// Run context ended); a release whose outcome is uncertain or that failed transiently is sent again
// within this bound. It must be positive. Default: [DefaultCleanupTimeout] (1s). If the release does
// not complete, the lease expires after the lease duration.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("leader", "cleanup timeout %v must be positive", d)
		}
		c.cleanupTimeout = d
		return nil
	})
}

// WithRecoveryBudget sets the connection-recovery budget: how long campaigning keeps retrying while
// every attempt fails without reaching the server (a refused or broken connection, a timeout). Once
// the failures have lasted d, counted from the first of them, Run returns an error matching
// [ErrRecoveryExhausted] and the last failure. Any attempt that reaches the server (won, contended,
// or a server reply such as LOADING or READONLY) starts the count again; a held term is not affected
// (its renewals self-fence as usual, and campaigning then counts). d must be positive; pass a very
// long duration to retry for ever. Default: [DefaultRecoveryBudget] (2 minutes).
func WithRecoveryBudget(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return luakit.InvalidConfig("leader", "recovery budget %v must be positive", d)
		}
		c.recovery = d
		return nil
	})
}

// WithKeyPrefix prepends prefix to both physical keys, like a prefixed client view. On Cluster a prefix
// containing a hash tag ({...}) decides the slot of both keys. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.prefix = prefix
		return nil
	})
}

// WithKeys sets the election's two keys for an existing layout: the lease at leaseKey, with fencing
// tokens from the counter at fenceKey, each after the [WithKeyPrefix] prefix. Without it the keys are
// derived from the election's name as the lock module derives a named lock's keys
// ([github.com/coordkit/coordkit/lock.Keys]: "{name}:lease" and "{name}:fence"), so they share one
// Cluster slot. Both keys are binary-safe, must be non-empty and must differ; on a Cluster client, or
// with [WithStrictSlots], they must hash to one slot (a common hash tag, such as "{scheduler}:leader" /
// "{scheduler}:fence"). [New] checks all of it, before any I/O. Every candidate of one election must
// use the same keys (and prefix).
func WithKeys(leaseKey, fenceKey string) Option {
	return optionFunc(func(c *config) error {
		if err := luakit.ValidateKey("lease key", leaseKey); err != nil {
			return luakit.InvalidConfigOf("leader", err, "")
		}
		if err := luakit.ValidateKey("fence key", fenceKey); err != nil {
			return luakit.InvalidConfigOf("leader", err, "")
		}
		c.leaseKey, c.fenceKey = leaseKey, fenceKey
		return nil
	})
}

// WithStrictSlots with on true makes [New] check on every client that the keys given with [WithKeys] hash to one
// Cluster slot, as it always does on a Cluster client (it is lock.WithStrictSlots for the election's
// lock): a pair a Cluster would reject then fails with a [*luakit.CrossSlotError] on a standalone or
// Sentinel client too, so the layout fails in development instead of after a move to Cluster. The
// keys derived from the name are checked on every client anyway. Default: off (false).
func WithStrictSlots(on bool) Option {
	return optionFunc(func(c *config) error {
		c.strictSlots = on
		return nil
	})
}

// WithTracker sets the tracker that campaigning wakes on (RESP3 client-side-caching invalidations of the
// lease key: a released lease is taken over in about a round trip). It must be wired into the same
// client's ClientOption.OnInvalidations. Default: the tracker of a client made by
// [luakit.NewTrackedClient] (see [luakit.TrackerOf]), so such a client needs no option; set it for a
// client wired by hand with [luakit.Tracker.Hook]. Without any tracker, or on a RESP2 / cache-disabled
// client, a waiting candidate wakes only at the holder's PTTL deadline (a release is noticed up to a
// lease duration late) and the lock module logs one warning per Election. Default (or nil): as above.
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithLogger sets the logger for warnings (failed renewals and releases, recovered observer panics).
// Keys and owner tokens are never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	})
}

// WithMeterProvider sets the OpenTelemetry meter provider for the package's instruments ([MetricChanges]
// and [MetricAcquireFailures]). Default (or nil): the global provider, otel.GetMeterProvider(), looked
// up by [New].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		c.meterProvider = mp
		return nil
	})
}

// OnElected sets the callback run, in its own goroutine, when this candidate wins a term. ctx is the
// term's context ([Term.Context]), cancelled when the term is revoked; send term.FencingToken with every
// protected write and stop when ctx ends. Returning voluntarily relinquishes leadership (the term is
// revoked and the lease released). Returning a non-nil error, or panicking, ends [Election.Run] with
// that error after the lease is released; an error returned after the term's context ended that matches
// its cause or context.Canceled counts as a normal return. Do not start work that outlives the callback.
// Default (or nil): a callback that holds leadership until revocation.
func OnElected(fn func(ctx context.Context, term Term) error) Option {
	return optionFunc(func(c *config) error {
		c.onElected = fn
		return nil
	})
}

// OnRevoked sets the callback run once per term, in its own goroutine, after the term's context was
// cancelled. It may overlap the elected callback while that drains; the election waits for both before
// releasing the lease and campaigning again. A panic ends [Election.Run] with an error wrapping
// [ErrCallbackPanic] after the lease is released. Default (or nil): none.
func OnRevoked(fn func(term Term)) Option {
	return optionFunc(func(c *config) error {
		c.onRevoked = fn
		return nil
	})
}

// OnChange adds an observer of leadership changes (each election and revocation of this candidate, in
// order). Observers run on one notification goroutine owned by Run, never on the election's own: a slow
// observer delays later notifications, not the election, and a panic is recovered and logged. Keep them
// short: Run waits for queued notifications before it returns. May be given several times; a nil fn
// adds nothing.
func OnChange(fn func(Change)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return nil
		}
		c.observers = append(c.observers, fn)
		return nil
	})
}

// WithHooks adds hooks that admit and observe the Election's operations (see [luakit.Hook]; primitive
// "leader"): LEADER CAMPAIGN for each campaign wait (one operation however many attempts it makes),
// LEADER RENEW for each renewal, LEADER RESIGN when leadership is given up (its repeats after
// uncertain replies included), LEADER INSPECT for [Election.Inspect]. The hooks are not passed to the lock the Election campaigns with: its
// LOCK operations are part of these and create no scope of their own. A rejected campaign ends
// [Election.Run] with the hook's error unchanged; a rejected renewal is handled like a failed one
// (retried until the lease can no longer be vouched for); a rejected resignation releases nothing
// (the lease expires after the lease duration). Hooks compose in order across calls. Default: none,
// and operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil })
}

// WithInstance labels the Election in its metrics (attribute coordkit.instance, see [AttrInstance])
// and for its hooks ([luakit.Operation].Instance), so several elections in one process export separate
// series. It must not be a key or a token. Default "": no instance attribute.
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.instance = instance; return nil })
}

// WithReplicaAck makes every campaign attempt and every renewal of a term wait for an acknowledgement
// from replicas (WAIT) or of append-only-file fsyncs (WAITAOF), as ack says (see [luakit.ReplicaAck]
// and lock.WithReplicaAck, which the Election's lock uses): a term whose lease and fencing token were
// not acknowledged in time is not won (the attempt is cleaned up and the campaign tries again after
// the retry delay), and a renewal that is not acknowledged does not extend the term, so a failover
// that promotes an acknowledging replica cannot issue the term's token a second time. What this
// guarantees and what it does not: docs/replica-ack.md. The zero value turns it off; an invalid value
// makes New fail with an error matching [luakit.ErrInvalidConfig]. Default: off.
func WithReplicaAck(ack luakit.ReplicaAck) Option {
	return optionFunc(func(c *config) error {
		if err := ack.Validate("leader"); err != nil {
			return err
		}
		c.ack = ack
		return nil
	})
}

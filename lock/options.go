package lock

import (
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Option configures a [Locker]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys        luakit.Keyspace
	strictSlots bool
	tracker     *luakit.Tracker
	waitSlice   time.Duration    // the fair lock's wait slice; 0: DefaultWaitSlice
	conditional bool             // WithConditionalCommands
	own         ownership.Config // renew fraction, retry delay, cleanup timeout, logger; zero: the defaults
}

func defaultConfig() config {
	return config{own: ownership.Config{Name: "lock"}, conditional: true}
}

// WithKeyPrefix prepends prefix to every physical key (lease and fence key alike), like a prefixed client
// view. The prefix is binary-safe. On Cluster a prefix containing a hash tag ({...}) decides the slot of
// every key. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error { c.keys = luakit.NewKeyspace(prefix); return nil })
}

// WithStrictSlots with on true makes [Locker.TryAcquireKeys] and [Locker.AcquireKeys] check on every client that
// the two keys (after the prefix) hash to one Cluster slot, as they always do on a Cluster client: a
// pair a Cluster would reject then fails with a [*luakit.CrossSlotError] before any I/O on a standalone
// or Sentinel client too, so a layout that cannot move to a Cluster fails in development instead of
// in production. The one-name form (TryAcquire, Acquire) checks its derived keys on every client
// anyway. Default: off (false), so a standalone deployment may use any two keys.
func WithStrictSlots(on bool) Option {
	return optionFunc(func(c *config) error { c.strictSlots = on; return nil })
}

// WithConditionalCommands with on true (the default) lets a Lease's Extend and Release run as one
// server command where the server has it: SET ... IFEQ ... PX (Valkey 8.1+, Redis 8.4+) and DELIFEQ
// (Valkey 9.0+) or DELEX ... IFEQ (Redis 8.4+), probed once per Locker, the scripts elsewhere; with
// false every call runs the scripts and nothing is probed (for a proxy that passes only known
// commands, or an ACL audit that expects one command set everywhere). Answers are the same either
// way (see the package documentation, "Conditional commands").
func WithConditionalCommands(on bool) Option {
	return optionFunc(func(c *config) error { c.conditional = on; return nil })
}

// WithTracker sets the tracker [Locker.Acquire] wakes on; it must be wired into the client's
// ClientOption.OnInvalidations. Default (or nil): [luakit.TrackerOf] the client, so a client from
// [luakit.NewTrackedClient] needs no option. Without working tracking waiting logs one warning per
// Locker and wakes at the holders' TTL (see [ownership.Waiter]).
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error { c.tracker = t; return nil })
}

// DefaultWaitSlice is the wait slice of a [FairLocker] when [WithWaitSlice] is not given.
const DefaultWaitSlice = time.Second

// WithWaitSlice sets the wait slice of a [FairLocker] (made by [NewFair]): a queued waiter's entry
// lives for one slice and the waiter renews it every half slice (at least every quarter of its lease
// TTL), so a release skips a waiter that died or stopped waiting once a slice has passed since its
// last renewal. Shorter slices skip dead waiters sooner and cost one more round trip per waiter per
// renewal. It must be at least 10ms; default [DefaultWaitSlice] (1s). A [Locker] made by [New]
// ignores it.
func WithWaitSlice(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 10*time.Millisecond {
			return luakit.InvalidConfig("lock", "wait slice %v below 10ms", d)
		}
		c.waitSlice = d
		return nil
	})
}

// WithRenewFraction sets when Lease.KeepAlive renews: every fraction × TTL, in [0.05, 0.9] (at most 20 renewals per TTL). Default 1/3
// ([ownership.Config].RenewFraction).
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error { return c.own.SetRenewFraction(fraction) })
}

// WithCleanupTimeout bounds each owner-checked release the Locker sends on its own (after an uncertain or
// late acquisition, a late renewal's surrender, Close); positive. Default 1s ([ownership.Config]).
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetCleanupTimeout(d) })
}

// WithRetryDelay sets the wait of [Locker.Acquire] after a transient error, a late grant or a settled
// uncertain attempt, and of KeepAlive after a failed renewal; positive. Default 50ms ([ownership.Config]).
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithLogger sets the logger for warnings (failed renewals and cleanups, waiting without tracking);
// owner tokens and keys are never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

// WithHooks adds hooks that admit and observe the Locker's operations (see [luakit.Hook]): LOCK TRY
// ACQUIRE (TryAcquire, TryAcquireKeys), LOCK ACQUIRE (Acquire, AcquireKeys: one operation however many
// attempts it waits through), LOCK INSPECT, LOCK FORCE RELEASE, and on each Lease LOCK EXTEND, LOCK VERIFY, LOCK RELEASE and LOCK CLOSE.
// A busy lock (ErrNotAcquired) completes as [luakit.OutcomeSucceeded]. Hooks compose in order across
// calls. Default: none, and operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.own.Hooks = append(c.own.Hooks, hooks...); return nil })
}

// WithInstance labels this Locker for hooks ([luakit.Operation].Instance; the module has no instruments
// of its own), so several Lockers in one process stay apart. It must not be a key or a token.
// Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.own.Instance = instance; return nil })
}

// WithReplicaAck makes every acquisition and renewal wait for an acknowledgement from replicas (WAIT)
// or of append-only-file fsyncs (WAITAOF), as ack says (see [luakit.ReplicaAck]), so that its leases and fencing tokens
// survive a failover that promotes an acknowledging replica. An acquisition sends the acknowledgement
// pipelined behind its script, in the same round trip (on a Cluster on a dedicated connection); one that is
// not acknowledged in time is not granted: its owner-checked
// cleanup is sent and the call returns an error matching [luakit.ErrNotAcknowledged] (a
// [*luakit.AckError] that says how many replicas acknowledged), never retried by a waiting
// acquisition. A renewal (Extend, ExtendTTL, each KeepAlive round) waits for it the same way
// and counts only once acknowledged: until then the lease's local estimate stays where the last
// acknowledged write put it. Releases and verifications are not acknowledged. What this guarantees
// and what it does not: docs/replica-ack.md. The zero value turns it off; an invalid value makes the
// constructor fail with an error matching [luakit.ErrInvalidConfig]. Default: off.
func WithReplicaAck(ack luakit.ReplicaAck) Option {
	return optionFunc(func(c *config) error { return c.own.SetReplicaAck(ack) })
}

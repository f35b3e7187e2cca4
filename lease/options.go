package lease

import (
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Option configures a [Leases]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys    luakit.Keyspace
	tracker *luakit.Tracker
	own     ownership.Config // renew fraction, retry delay, cleanup timeout, logger
}

func defaultConfig() config {
	return config{own: ownership.Config{
		Name:           "lease",
		RenewFraction:  1.0 / 3,
		RetryDelay:     50 * time.Millisecond,
		CleanupTimeout: time.Second,
		Logger:         slog.Default(),
	}}
}

// WithKeyPrefix prepends prefix to every hash key, like a prefixed client view. Fields are not
// prefixed. The prefix is binary-safe; on Cluster a prefix containing a hash tag ({...}) decides the
// slot of every hash. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error { c.keys = luakit.NewKeyspace(prefix); return nil })
}

// WithTracker sets the tracker [Leases.Acquire] wakes on; it must be wired into the client's
// ClientOption.OnInvalidations. Default (or nil): [luakit.TrackerOf] the client, so a client from
// [luakit.NewTrackedClient] needs no option. Without working tracking waiting logs one warning per
// Leases and wakes at the holders' TTL (see [ownership.Waiter]).
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error { c.tracker = t; return nil })
}

// WithRenewFraction sets when Lease.KeepAlive renews: every fraction × TTL, in [0.05, 0.9] (at most 20 renewals per TTL). Default 1/3
// ([ownership.Config].RenewFraction).
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error { return c.own.SetRenewFraction(fraction) })
}

// WithCleanupTimeout bounds each owner-checked release the Leases sends on its own (after an uncertain or
// late acquisition, a late renewal's surrender, Close); positive. Default 1s ([ownership.Config]).
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetCleanupTimeout(d) })
}

// WithRetryDelay sets the wait of [Leases.Acquire] after a transient error, a late grant or a settled
// uncertain attempt, and of KeepAlive after a failed renewal; positive. Default 50ms ([ownership.Config]).
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithLogger sets the logger for warnings (failed renewals and cleanups, waiting without tracking);
// owner tokens and keys are never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

// WithHooks adds hooks that admit and observe the operations of the Leases (see [luakit.Hook]): LEASE
// TRY ACQUIRE, LEASE ACQUIRE (one operation however many attempts it waits through), LEASE INSPECT,
// LEASE FORCE RELEASE, and on each Lease LEASE EXTEND, LEASE VERIFY, LEASE RELEASE and LEASE CLOSE. A
// held field (ErrNotAcquired) completes as [luakit.OutcomeSucceeded]. Hooks compose in order across
// calls. Default: none, and operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.own.Hooks = append(c.own.Hooks, hooks...); return nil })
}

// WithInstance labels these Leases for hooks ([luakit.Operation].Instance; the module has no instruments
// of its own), so several in one process stay apart. It must not be a key or a token. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.own.Instance = instance; return nil })
}

// WithReplicaAck makes every acquisition and renewal wait for an acknowledgement from replicas (WAIT)
// or of append-only-file fsyncs (WAITAOF), as ack says (see [luakit.ReplicaAck]), so that its leases
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

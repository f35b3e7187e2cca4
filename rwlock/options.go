package rwlock

import (
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Option configures a [Locker]. Options are applied in order by [New]; an invalid value makes New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys    luakit.Keyspace
	tracker *luakit.Tracker
	own     ownership.Config // renew fraction, cleanup timeout, retry delay, logger; shared by every lease
}

func defaultConfig() config {
	return config{own: ownership.Config{Name: "rwlock"}} // zero fields: the documented defaults
}

// WithKeyPrefix prepends prefix to every physical key, like a prefixed client view. The prefix is
// binary-safe. Each lock is one key, so on Cluster no hash tag is needed; a prefix containing one
// merely decides the slot of every key. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error { c.keys = luakit.NewKeyspace(prefix); return nil })
}

// WithTracker sets the tracker [Locker.AcquireRead] and [Locker.AcquireWrite] wakes on; it must be wired into the client's
// ClientOption.OnInvalidations. Default (or nil): [luakit.TrackerOf] the client, so a client from
// [luakit.NewTrackedClient] needs no option. Without working tracking waiting logs one warning per
// Locker and wakes at the holders' TTL (see [ownership.Waiter]).
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error { c.tracker = t; return nil })
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

// WithRetryDelay sets the wait of [Locker.AcquireRead] and [Locker.AcquireWrite] after a transient error, a late grant or a settled
// uncertain attempt, and of KeepAlive after a failed renewal; positive. Default 50ms ([ownership.Config]).
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithLogger sets the logger for warnings (failed renewals and cleanups, waiting without tracking);
// owner tokens and keys are never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

// WithHooks adds hooks that admit and observe the operations of the Locker (see [luakit.Hook]):
// RWLOCK TRY ACQUIRE READ, RWLOCK TRY ACQUIRE WRITE, RWLOCK ACQUIRE READ and RWLOCK ACQUIRE WRITE (one operation however many attempts it waits through), RWLOCK INSPECT, and on each Lease RWLOCK EXTEND, RWLOCK VERIFY, RWLOCK RELEASE and RWLOCK CLOSE. A busy lock (ErrNotAcquired)
// completes as [luakit.OutcomeSucceeded]. Hooks compose in order across calls. Default: none, and
// operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.own.Hooks = append(c.own.Hooks, hooks...); return nil })
}

// WithInstance labels this Locker for hooks ([luakit.Operation].Instance; the module has no instruments
// of its own), so several in one process stay apart. It must not be a key or a token. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.own.Instance = instance; return nil })
}

// WithReplicaAck makes every acquisition and renewal wait for an acknowledgement from replicas (WAIT)
// or of append-only-file fsyncs (WAITAOF), as ack says (see [luakit.ReplicaAck]), so that its read and write leases
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

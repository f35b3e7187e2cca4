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
	return config{own: ownership.Config{
		Name:           "rwlock",
		RenewFraction:  1.0 / 3,
		CleanupTimeout: time.Second,
		RetryDelay:     50 * time.Millisecond,
		Logger:         slog.Default(),
	}}
}

// WithKeyPrefix prepends prefix to every physical key, like a prefixed client view. The prefix is
// binary-safe. Each lock is one key, so on Cluster no hash tag is needed; a prefix containing one
// merely decides the slot of every key. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithTracker sets the tracker through which [Locker.AcquireRead] and [Locker.AcquireWrite] wake on
// RESP3 client-side-caching invalidations of the lock key. It must be wired into the same client's
// ClientOption.OnInvalidations (Tracker.Hook). Without this option the tracker of a client built by
// [luakit.NewTrackedClient] is found by itself (see [luakit.TrackerOf]). Without any tracker, or on a
// RESP2 / cache-disabled client, waiting still works but wakes only when the conflicting holders' TTL
// passes, not when they release; the Locker then logs one warning. A nil t means "find it". Default:
// none.
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithRenewFraction sets when [Lease.KeepAlive] renews: every fraction × TTL. It must be in (0, 0.9].
// Default: 1/3, so two renewals can fail before the lease expires.
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error { return c.own.SetRenewFraction(fraction) })
}

// WithCleanupTimeout bounds the best-effort work done without the caller's context: the owner-checked
// release sent after an uncertain or late acquisition or a late renewal (it runs even when the caller's
// ctx is cancelled, but never longer than d), and [Lease.Close]. It must be positive. Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetCleanupTimeout(d) })
}

// WithRetryDelay sets how long a waiting acquisition waits before trying again after a transient
// server error (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY), a late grant or an
// uncertain attempt whose cleanup was answered, and how long [Lease.KeepAlive] waits after a failed
// renewal (at most a quarter of its renew period). It must be positive. Default: 50ms.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithLogger sets the logger for warnings: failed best-effort cleanups (after an uncertain
// acquisition and in [Lease.Close]), failed background renewals, and waiting without invalidations.
// Owner tokens and keys are never logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

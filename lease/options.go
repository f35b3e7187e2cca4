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
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithTracker sets the tracker that [Leases.Acquire] wakes on (RESP3 client-side-caching invalidations
// of the hash key); it must be wired into the same client's ClientOption.OnInvalidations. Default: the
// tracker of a client made by [luakit.NewTrackedClient] (see [luakit.TrackerOf]), so such a client
// needs no option; set it for a client wired by hand with [luakit.Tracker.Hook]. Without a tracker, or
// on a RESP2 / cache-disabled client, Acquire still works but logs one warning per Leases and wakes
// only at the held field's HPTTL deadline (and once a second for a field without expiry). A nil t
// selects the default.
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithRenewFraction sets when Lease.KeepAlive ([ownership.Handle.KeepAlive]) renews: every
// fraction × TTL. It must be in (0, 0.9]. Default: 1/3, so two renewals can fail before the lease
// expires.
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error { return c.own.SetRenewFraction(fraction) })
}

// WithCleanupTimeout bounds each owner-checked release the Leases sends on its own: after an uncertain
// or late acquisition, and the surrender after a renewal whose reply came after the local estimate
// elapsed. It runs even when the caller's ctx is cancelled, but never longer than d. It must be
// positive. Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetCleanupTimeout(d) })
}

// WithRetryDelay sets how long [Leases.Acquire] waits before retrying after a transient server error
// (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY), a late grant or a settled uncertain
// attempt, and how long Lease.KeepAlive waits after a failed renewal (capped at a quarter of its renew
// period). It must be positive. Default: 50ms.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithLogger sets the logger for warnings: failed background renewals, failed cleanups, and the one
// warning per Leases that waiting cannot wake on invalidations. Owner tokens, keys and fields are never
// logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

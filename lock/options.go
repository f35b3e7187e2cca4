package lock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Locker]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys           luakit.Keyspace
	tracker        *luakit.Tracker
	renewFraction  float64
	releaseTimeout time.Duration
	retryDelay     time.Duration
	untrackedWait  time.Duration
	logger         *slog.Logger
}

func defaultConfig() config {
	return config{
		renewFraction:  1.0 / 3,
		releaseTimeout: time.Second,
		retryDelay:     50 * time.Millisecond,
		untrackedWait:  time.Second,
		logger:         slog.Default(),
	}
}

// WithKeyPrefix prepends prefix to every physical key (lease and fence key alike), like a prefixed client
// view. The prefix is binary-safe. On Cluster a prefix containing a hash tag ({...}) decides the slot of
// every key. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithTracker makes [Locker.Acquire] wake on RESP3 client-side-caching invalidations of the lease key.
// The tracker must be wired into the same client's ClientOption.OnInvalidations (see
// [luakit.NewTrackedClient]). Without a tracker, or on a RESP2 / cache-disabled client, Acquire still
// works but wakes only at the lease's PTTL deadline (and once a second for a lease without expiry). With
// tracking, a waiter also re-arms at least every [luakit.ArmCacheTTL]. Default: none.
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithRenewFraction sets when [Lease.KeepAlive] renews: every fraction × TTL. It must be in (0, 0.9].
// Default: 1/3, so two renewals can fail before the lease expires.
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error {
		if !(fraction > 0 && fraction <= 0.9) {
			return fmt.Errorf("lock: renew fraction %v outside (0, 0.9]", fraction)
		}
		c.renewFraction = fraction
		return nil
	})
}

// WithCleanupTimeout bounds the owner-checked release sent after an uncertain or late acquisition
// (it runs even when the caller's ctx is cancelled, but never longer than d). It must be positive.
// Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("lock: cleanup timeout %v must be positive", d)
		}
		c.releaseTimeout = d
		return nil
	})
}

// WithRetryDelay sets how long [Locker.Acquire] waits before retrying after a transient server error
// (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY). It must be positive. Default: 50ms.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("lock: retry delay %v must be positive", d)
		}
		c.retryDelay = d
		return nil
	})
}

// WithLogger sets the logger for warnings from background renewal. Owner tokens and keys are never
// logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("lock: nil logger")
		}
		c.logger = l
		return nil
	})
}

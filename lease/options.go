package lease

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Leases]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys           luakit.Keyspace
	tracker        *luakit.Tracker
	cleanupTimeout time.Duration
	retryDelay     time.Duration
	untrackedWait  time.Duration
	logger         *slog.Logger
}

func defaultConfig() config {
	return config{
		cleanupTimeout: time.Second,
		retryDelay:     50 * time.Millisecond,
		untrackedWait:  time.Second,
		logger:         slog.Default(),
	}
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

// WithTracker makes [Leases.Acquire] wake on RESP3 client-side-caching invalidations of the hash key.
// The tracker must be wired into the same client's ClientOption.OnInvalidations (see
// [luakit.NewTrackedClient]). Without a tracker, or on a RESP2 / cache-disabled client, Acquire still
// works but wakes only at the held field's HPTTL deadline (and once a second for a field without
// expiry). Default: none.
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithCleanupTimeout bounds the owner-checked release sent after an uncertain or late acquisition
// (it runs even when the caller's ctx is cancelled, but never longer than d). It must be positive.
// Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("lease: cleanup timeout %v must be positive", d)
		}
		c.cleanupTimeout = d
		return nil
	})
}

// WithRetryDelay sets how long [Leases.Acquire] waits before retrying after a transient server error
// (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY), a late reply, or an uncertain attempt
// whose cleanup was answered. It must be positive. Default: 50ms.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("lease: retry delay %v must be positive", d)
		}
		c.retryDelay = d
		return nil
	})
}

// WithLogger sets the logger for warnings (an owner-checked cleanup after an uncertain acquisition that
// got no answer). Owner tokens, keys and fields are never logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("lease: nil logger")
		}
		c.logger = l
		return nil
	})
}

package semaphore

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Option configures a [Semaphore]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys          luakit.Keyspace
	tracker       *luakit.Tracker
	own           ownership.Config // name, renew fraction, retry delay, cleanup timeout, logger
	retryWindow   time.Duration
	meterProvider metric.MeterProvider
}

func defaultConfig() config {
	return config{
		own: ownership.Config{
			Name: "semaphore", NoExpiry: true, RenewFraction: 1.0 / 3, RetryDelay: 50 * time.Millisecond,
			CleanupTimeout: time.Second, Logger: slog.Default(),
		},
		retryWindow: time.Minute,
	}
}

// WithKeyPrefix prepends prefix to the semaphore key, like a prefixed client view. The prefix is
// binary-safe. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithTracker sets the tracker that makes [Semaphore.Acquire] wake on RESP3 client-side-caching
// invalidations of the semaphore key; it must be wired into the same client's
// ClientOption.OnInvalidations. Default: the tracker of a client built by [luakit.NewTrackedClient]
// ([luakit.TrackerOf]), else none. Without one, or on a RESP2 / cache-disabled client, Acquire still
// works but wakes only when the earliest permit expires (and once a second while every permit is
// without expiry), and logs one warning per Semaphore. With tracking, a waiter also re-arms at least
// every [luakit.ArmCacheTTL]. A nil t selects the default.
func WithTracker(t *luakit.Tracker) Option {
	return optionFunc(func(c *config) error {
		c.tracker = t
		return nil
	})
}

// WithRenewFraction sets when Permit.KeepAlive renews: every fraction × TTL. It must be in (0, 0.9].
// Default: 1/3, so two renewals can fail before the permit's local estimate elapses.
func WithRenewFraction(fraction float64) Option {
	return optionFunc(func(c *config) error { return c.own.SetRenewFraction(fraction) })
}

// WithRetryDelay sets how long [Semaphore.Acquire] waits before trying again after a transient server
// error (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY, ...), a late grant, or an uncertain
// attempt whose cleanup was answered, and how long Permit.KeepAlive waits after a failed renewal
// (capped at a quarter of its period). It must be positive. Default: 50ms.
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetRetryDelay(d) })
}

// WithCleanupTimeout bounds each owner-token release that the package sends on its own: the one after an
// uncertain, failed or late acquisition, the surrender after a late renewal, the one [Permit.Close]
// sends, and each background retry. Those run even when the caller's ctx is cancelled, but never longer
// than d. (Permit.Release is bounded by its ctx alone.) It must be positive. Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error { return c.own.SetCleanupTimeout(d) })
}

// WithCleanupRetryWindow sets how long an unconfirmed cleanup release is retried in the background (with
// jittered exponential backoff) before it is abandoned, counted and logged. It must be positive.
// Default: 1 minute.
func WithCleanupRetryWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("semaphore: cleanup retry window %v must be positive", d)
		}
		c.retryWindow = d
		return nil
	})
}

// WithLogger sets the logger for warnings: failed and abandoned cleanups, failed background renewals,
// waiting without invalidations. Owner tokens and keys are never logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error { return c.own.SetLogger(l) })
}

// WithMeterProvider sets the OpenTelemetry meter provider for the package's instruments (see
// [MetricCleanupAbandoned]). Default: the global provider, otel.GetMeterProvider(), looked up by [New].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		if mp == nil {
			return fmt.Errorf("semaphore: nil meter provider")
		}
		c.meterProvider = mp
		return nil
	})
}

func (c *config) provider() metric.MeterProvider {
	if c.meterProvider != nil {
		return c.meterProvider
	}
	return otel.GetMeterProvider()
}

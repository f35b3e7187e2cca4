package semaphore

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Semaphore]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys           luakit.Keyspace
	releaseTimeout time.Duration
	retryWindow    time.Duration
	logger         *slog.Logger
	meterProvider  metric.MeterProvider
}

func defaultConfig() config {
	return config{
		releaseTimeout: time.Second,
		retryWindow:    time.Minute,
		logger:         slog.Default(),
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

// WithCleanupTimeout bounds each owner-token release that the package sends on its own: the one after an
// uncertain or failed acquisition, after a failed [Permit.Extend], by [Permit.Close], and each background
// retry. Those run even when the caller's ctx is cancelled, but never longer than d. [Permit.Release] is
// bounded by both its ctx and d. It must be positive. Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("semaphore: cleanup timeout %v must be positive", d)
		}
		c.releaseTimeout = d
		return nil
	})
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

// WithLogger sets the logger for warnings about abandoned cleanups. Owner tokens and keys are never
// logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("semaphore: nil logger")
		}
		c.logger = l
		return nil
	})
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

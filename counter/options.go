package counter

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Store]. Options are applied in order by [New]; invalid values make New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys          luakit.Keyspace
	probeInterval time.Duration
	probeTimeout  time.Duration
	logger        *slog.Logger
}

func defaultConfig() config {
	return config{
		probeInterval: 100 * time.Millisecond,
		probeTimeout:  time.Second,
		logger:        slog.Default(),
	}
}

// WithKeyPrefix prepends prefix to every physical key, like a prefixed client view. The prefix is
// binary-safe. On Cluster a prefix containing a hash tag ({...}) puts every counter in that tag's
// slot. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithProbeInterval sets how often, while the store is disconnected, a background probe tries to
// reach the server (one cheap EXISTS per probe). It must be positive. Default: 100ms. Lower values
// notice a reconnect sooner at the cost of more dial attempts against a down server.
func WithProbeInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("counter: probe interval %v must be positive", d)
		}
		c.probeInterval = d
		return nil
	})
}

// WithProbeTimeout bounds each background probe. It must be positive. Default: 1s.
func WithProbeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("counter: probe timeout %v must be positive", d)
		}
		c.probeTimeout = d
		return nil
	})
}

// WithLogger sets the logger for connectivity changes and background flush failures. Keys are never
// logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("counter: nil logger")
		}
		c.logger = l
		return nil
	})
}

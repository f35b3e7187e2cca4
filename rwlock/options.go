package rwlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures a [Locker]. Options are applied in order by [New]; an invalid value makes New fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys           luakit.Keyspace
	cleanupTimeout time.Duration
	logger         *slog.Logger
}

func defaultConfig() config {
	return config{
		cleanupTimeout: time.Second,
		logger:         slog.Default(),
	}
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

// WithCleanupTimeout bounds the best-effort work done without the caller's context: the owner-checked
// release sent after an uncertain or late acquisition (it runs even when the caller's ctx is cancelled,
// but never longer than d), and [Lease.Close]. It must be positive. Default: 1s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("rwlock: cleanup timeout %v must be positive", d)
		}
		c.cleanupTimeout = d
		return nil
	})
}

// WithLogger sets the logger for warnings about failed best-effort cleanups (after an uncertain
// acquisition and in [Lease.Close]). Owner tokens and keys are never logged. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("rwlock: nil logger")
		}
		c.logger = l
		return nil
	})
}

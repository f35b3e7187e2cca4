package latch

import (
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Option configures [Latches]. Options are applied in order by [New]; invalid values make New fail
// with an error matching luakit.ErrInvalidConfig. A nil Option is ignored.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	keys    luakit.Keyspace
	recheck time.Duration
}

func defaultConfig() config {
	return config{recheck: time.Second}
}

// WithKeyPrefix prepends prefix to every latch key, like a prefixed client view. The prefix is
// binary-safe; the Pub/Sub channel follows the prefixed key. Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithRecheckInterval sets how often a waiting [Latch.Wait] re-reads the latch even when no Pub/Sub
// message arrived: the bound on how long a lost message (a dropped connection, a failover) delays a
// waiter. It must be at least 1ms. Default: 1s.
func WithRecheckInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Millisecond {
			return luakit.InvalidConfig("latch", "recheck interval %v must be at least 1ms", d)
		}
		c.recheck = d
		return nil
	})
}

// CreateOption configures one [Latches.Create] or [Latches.Reset] call; invalid values make the call
// fail before any I/O with an error matching luakit.ErrInvalidConfig. A nil CreateOption is ignored.
type CreateOption interface {
	applyCreate(*createConfig) error
}

type createOptionFunc func(*createConfig) error

func (f createOptionFunc) applyCreate(c *createConfig) error { return f(c) }

type createConfig struct {
	expiryMS int64 // 0: none
}

// WithExpiry makes the whole latch (the key) expire d after it is created or reset, truncated to whole
// milliseconds, measured on the server's clock (PEXPIRE). When it passes before the latch is deleted,
// every waiter of the generation returns [ErrLatchExpired] (not [ErrReplaced]), and so do CountDown,
// Count and Abort. d must be at least 1ms ([ErrInvalidExpiry], before any I/O). Default: no expiry
// (the caller chooses the key's lifetime and deletes it when every participant is done).
func WithExpiry(d time.Duration) CreateOption {
	return createOptionFunc(func(c *createConfig) error {
		ms := d.Milliseconds()
		if ms < 1 {
			return &argError{msg: fmt.Sprintf("latch: expiry must be at least 1ms (got %v)", d), kind: ErrInvalidExpiry}
		}
		c.expiryMS = ms
		return nil
	})
}

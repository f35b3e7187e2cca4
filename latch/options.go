package latch

import (
	"errors"
	"log/slog"
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
	keys     luakit.Keyspace
	recheck  time.Duration
	hooks    luakit.Hooks // WithHooks
	instance string       // WithInstance
	logger   *slog.Logger // WithLogger
}

func defaultConfig() config {
	return config{recheck: time.Second, logger: slog.Default()}
}

// WithLogger sets the logger for warnings of the background Pub/Sub subscription that wakes waiters
// (a subscription that ended and is renewed, logged once per run of failures). Keys and channels are
// never logged. Default (or nil): slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
		return nil
	})
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
			return luakit.InvalidConfigOf("latch", ErrInvalidExpiry, "expiry must be at least 1ms (got %v)", d)
		}
		c.expiryMS = ms
		return nil
	})
}

// WithHooks adds hooks that admit and observe the public operations of the Latches and of every
// Latch they return (see [luakit.Hook]; primitive "latch"): LATCH CREATE, LATCH RESET, LATCH JOIN,
// LATCH INSPECT and LATCH FORCE DELETE on Latches, LATCH COUNT DOWN, LATCH COUNT, LATCH ABORT,
// LATCH DELETE and LATCH WAIT on a Latch. A Wait is one operation however many re-reads,
// subscriptions and retries it makes; ForceDelete's delete is part of it. A rejected admission
// returns the hook's error unchanged and sends nothing. An answer about the latch ([ErrExists],
// [ErrNotFound], [ErrCompleted], [ErrReplaced], [ErrLatchExpired], [ErrAborted], false results)
// completes as [luakit.OutcomeSucceeded]. Hooks compose in order across calls. Default: none, and
// operations then allocate nothing for hooks.
func WithHooks(hooks ...luakit.Hook) Option {
	return optionFunc(func(c *config) error { c.hooks = append(c.hooks, hooks...); return nil })
}

// WithInstance labels these Latches for hooks ([luakit.Operation].Instance), so several in one process
// stay apart. It must not be a key or a token. Default "".
func WithInstance(instance string) Option {
	return optionFunc(func(c *config) error { c.instance = instance; return nil })
}

// The operation names of the hooks ([WithHooks]).
const (
	opCreate      = "LATCH CREATE"
	opReset       = "LATCH RESET"
	opJoin        = "LATCH JOIN"
	opInspect     = "LATCH INSPECT"
	opForceDelete = "LATCH FORCE DELETE"
	opCountDown   = "LATCH COUNT DOWN"
	opCount       = "LATCH COUNT"
	opAbort       = "LATCH ABORT"
	opDelete      = "LATCH DELETE"
	opWait        = "LATCH WAIT"
)

// op is the hook operation name for these Latches.
func (ls *Latches) op(name string) luakit.Operation {
	return luakit.Operation{Primitive: "latch", Name: name, Instance: ls.cfg.instance}
}

// endAnswer completes a scope: an answer about the latch is a success, not a failure. Without hooks it
// classifies nothing (errors.Is would allocate on errors with several causes).
func (ls *Latches) endAnswer(sc *luakit.Scope, err error) {
	if len(ls.cfg.hooks) == 0 {
		return
	}
	for _, answer := range []error{ErrExists, ErrNotFound, ErrCompleted, ErrReplaced, ErrLatchExpired, ErrAborted} {
		if errors.Is(err, answer) {
			sc.EndWith(luakit.OutcomeSucceeded, err)
			return
		}
	}
	sc.End(err)
}

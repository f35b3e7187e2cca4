package ratelimit

import (
	"context"
	"embed"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed reset_refund.lua
var resetFS embed.FS

// resetRefundScript deletes a limiter's state or gives permits back (one script each call).
var resetRefundScript = luakit.MustLoad(resetFS, "reset_refund")

// ErrRefundUnsupported is returned by Refund for a policy where giving permits back is not well
// defined: a [SlidingWindow], or a [Composite] with a sliding-window component (the segment a permit
// was charged to is not known, so returning it to any segment would release it at the wrong time).
// It is returned before any I/O and matches [ErrInvalidConfig].
var ErrRefundUnsupported = luakit.ConfigSentinel("ratelimit: refund not defined for a sliding window")

// layoutArg is the layout the reset and refund script expects at the key.
func (c *compiled) layoutArg() string {
	if c.algo == algoGCRA {
		return "g"
	}
	return layoutTag(c.algo)
}

// reset deletes the state at key in one script.
func (c *compiled) reset(ctx context.Context, client rueidis.Client, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: reset: %w", err)
	}
	ctx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	if err := resetRefundScript.Exec(ctx, client, []string{key}, []string{"x", c.layoutArg()}).Error(); err != nil {
		return engineError(err)
	}
	return nil
}

// refundArgs returns the refund ARGV for n permits, or ErrRefundUnsupported.
func (c *compiled) refundArgs(n int64) ([]string, error) {
	if c.algo == algoGCRA {
		if c.keyed {
			return []string{"r", strconv.FormatInt(n, 10), "g", strconv.FormatInt(c.emission, 10), "k", c.sig}, nil
		}
		return []string{"r", strconv.FormatInt(n, 10), "g", strconv.FormatInt(c.emission, 10)}, nil
	}
	args := []string{"r", strconv.FormatInt(n, 10), layoutTag(c.algo), "", strconv.Itoa(len(c.comps))}
	if c.algo == algoComposite {
		args[3] = c.sig
	}
	for i, cc := range c.comps {
		switch cc.algo {
		case algoFixed:
			args = append(args, "f", strconv.FormatInt(cc.limit, 10))
		case algoBucket:
			args = append(args, "t", strconv.FormatInt(cc.limit, 10))
		default:
			return nil, fmt.Errorf("%w (component %d)", ErrRefundUnsupported, i)
		}
	}
	if c.keyed {
		args = append(args, "k", c.sig)
	}
	return args, nil
}

// refund gives n permits back at key in one script.
func (c *compiled) refund(ctx context.Context, client rueidis.Client, key string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: %d", ErrNegativePermits, n)
	}
	args, err := c.refundArgs(n)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: refund: %w", err)
	}
	ctx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	if err := resetRefundScript.Exec(ctx, client, []string{key}, args).Error(); err != nil {
		return engineError(err)
	}
	return nil
}

// Reset deletes the limiter's shared state in the server in one script (one round trip), so the
// key is back at full capacity for every process sharing it. An absent key is not an error. The key
// must hold this limiter's layout: another type, another limiter's layout or a value not in the
// current storage format is [ErrForeignData] with nothing deleted (a composite's signature is not checked: Reset clears any composite state).
// It ignores the deny list and the local queue (waiting requests keep their timers).
//
// It blocks until the reply or until ctx ends. Errors: [ErrClosed] after Close, the context's error,
// a server error, each wrapped with a "ratelimit: " prefix; an error wrapping [ErrUncertain] means
// the deletion may have happened. Safe for concurrent use.
func (l *Limiter) Reset(ctx context.Context) error {
	ctx, sc, err := l.hooks.Begin(ctx, op(opReset, l.inst))
	if err != nil {
		return err
	}
	err = l.reset(ctx)
	sc.End(err)
	return err
}

func (l *Limiter) reset(ctx context.Context) error {
	if l.closedFlag.Load() {
		return l.closedErr()
	}
	return l.current().reset(ctx, l.client, l.key)
}

// Refund gives n permits back to the shared state in the server in one script, for example after a
// downstream call failed, as the inverse of an admission: a GCRA TAT moves back by n emission
// intervals (never before now), a fixed window's count drops by n (never below 0), a token bucket's
// tokens rise by n (never above the limit), a composite's components each by their rule. It never
// creates capacity above the policy's. A sliding window (alone or in a composite) is
// [ErrRefundUnsupported] before any I/O; n = 0 is a no-op without I/O; a negative n is
// [ErrNegativePermits]; an absent key owes nothing. It blocks until the reply or until ctx ends.
// Errors: [ErrClosed] after Close; [ErrForeignData] or [ErrConfigMismatch] (nothing written); the
// context's error or a server error, wrapped with a "ratelimit: " prefix; one wrapping [ErrUncertain]
// means the refund may have happened (do not blindly retry it). It neither wakes the queue nor counts
// in [Stats]. Safe for concurrent use.
func (l *Limiter) Refund(ctx context.Context, n int64) error {
	ctx, sc, err := l.hooks.Begin(ctx, op(opRefund, l.inst))
	if err != nil {
		return err
	}
	err = l.refund(ctx, n)
	sc.End(err)
	return err
}

func (l *Limiter) refund(ctx context.Context, n int64) error {
	if l.closedFlag.Load() {
		return l.closedErr()
	}
	return l.current().refund(ctx, l.client, l.key, n)
}

// Reset deletes key's shared state in the server; see [Limiter.Reset]. key must not be empty (an
// error matching [ErrInvalidConfig], before any I/O).
func (k *Keyed) Reset(ctx context.Context, key string) error {
	ctx, sc, err := k.cfg.hooks.Begin(ctx, op(opReset, k.cfg.instance))
	if err != nil {
		return err
	}
	err = k.reset(ctx, key)
	sc.End(err)
	return err
}

func (k *Keyed) reset(ctx context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	if k.isClosed() {
		return errClosed
	}
	c, _ := k.current()
	return c.reset(ctx, k.client, k.cfg.keys.Key(key))
}

// Refund gives n permits back to key's shared state; see [Limiter.Refund]. key must not be empty
// (an error matching [ErrInvalidConfig], before any I/O). A key still stored under other settings
// (not yet converted by a decision after [Keyed.SetPolicy], or stored by another process's settings) is
// refunded nothing and is not an error.
func (k *Keyed) Refund(ctx context.Context, key string, n int64) error {
	ctx, sc, err := k.cfg.hooks.Begin(ctx, op(opRefund, k.cfg.instance))
	if err != nil {
		return err
	}
	err = k.refund(ctx, key, n)
	sc.End(err)
	return err
}

func (k *Keyed) refund(ctx context.Context, key string, n int64) error {
	if key == "" {
		return errEmptyKey
	}
	if k.isClosed() {
		return errClosed
	}
	c, _ := k.current()
	return c.refund(ctx, k.client, k.cfg.keys.Key(key), n)
}

package ratelimit

// This file holds live settings updates: the update barrier every attempt passes, Limiter.Update
// (Migrate or Adopt) and Keyed.SetPolicy.

import (
	"context"
	"errors"
	"fmt"
)

// updatingBit is set in Limiter.state while an Update holds the barrier.
const updatingBit = int64(1) << 62

// enter waits while an Update is in progress, then registers an active attempt and returns the
// settings it must use, marking w (when not nil) as sent. leave must follow. Without w and without
// an Update in progress it takes no lock: one compare-and-swap.
func (l *Limiter) enter(ctx context.Context, w *waiter) (*compiled, error) {
	if w == nil {
		for {
			s := l.state.Load()
			if s&updatingBit != 0 {
				break
			}
			if l.state.CompareAndSwap(s, s+1) {
				if l.closedFlag.Load() {
					l.leave()
					return nil, l.closedErr()
				}
				return l.curP.Load(), nil
			}
		}
	}
	for {
		l.mu.Lock()
		if l.closed {
			err := l.closeErr
			l.mu.Unlock()
			return nil, err
		}
		if !l.updating {
			// updatingBit is only set under mu: it is clear now.
			l.state.Add(1)
			c := l.cur
			if w != nil {
				w.sent, w.used = true, c
			}
			l.mu.Unlock()
			return c, nil
		}
		gate := l.gate
		l.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, fmt.Errorf("ratelimit: waiting for an update: %w", ctx.Err())
		}
	}
}

func (l *Limiter) leave() {
	if l.state.Add(-1) == updatingBit {
		// The last attempt an Update waits for.
		l.mu.Lock()
		l.openGateLocked()
		l.mu.Unlock()
	}
}

// openGateLocked wakes every goroutine waiting on the barrier so that it re-checks its condition.
func (l *Limiter) openGateLocked() {
	close(l.gate)
	l.gate = make(chan struct{})
}

// Update changes the limiter's settings at runtime, keeping the key (see the package documentation,
// "Updating settings at runtime", for each algorithm's rule). mode must be [Migrate] (one script
// converts the stored usage) or [Adopt] (local only, no I/O; for every other process after one has
// migrated); the zero UpdateMode is invalid. policy must use the same algorithm (for a [Composite],
// the same number and algorithm of each component). A bad mode or algorithm ([ErrInvalidUpdate]) or
// policy ([ErrInvalidPolicy]) fails before any I/O with the old settings kept; identical settings
// are a no-op. New attempts wait and attempts in progress finish, then the new settings are published
// together and the queue wakes. ctx bounds that wait; once the migration script is sent, Update waits
// for its reply for at most [WithUpdateTimeout] whatever ctx does. A rejection before writing
// ([ErrConfigMismatch], [ErrDebtOverflow], [ErrForeignData], [ErrNoPermission]) keeps the old
// settings; any other failure (an unanswered script wraps [ErrUncertain]) closes the limiter and
// fails its queue, because the server may hold the migrated state: reconcile, do not blindly retry.
// Updates of one instance are serialized; after Close it returns [ErrClosed].
func (l *Limiter) Update(ctx context.Context, policy Policy, mode UpdateMode) error {
	ctx, sc, err := l.hooks.Begin(ctx, op(opUpdate, l.inst))
	if err != nil {
		return err
	}
	err = l.update(ctx, policy, mode)
	sc.End(err)
	return err
}

func (l *Limiter) update(ctx context.Context, policy Policy, mode UpdateMode) error {
	if mode != Migrate && mode != Adopt {
		return fmt.Errorf("%w: unknown update mode %v", ErrInvalidUpdate, mode)
	}
	nc, err := compile(clonePolicy(policy))
	if err != nil {
		return err
	}
	policy = nc.src // durations rounded up to whole µs
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: update: %w", err)
	}
	if err := l.takeUpdateSlot(ctx); err != nil {
		return err
	}
	defer func() { <-l.updSem }()

	l.mu.Lock()
	if l.closed {
		err := l.closeErr
		l.mu.Unlock()
		return err
	}
	cur := l.cur
	l.mu.Unlock()
	if err := cur.compatible(nc); err != nil {
		return err
	}
	if cur.equal(nc) {
		return nil
	}

	if err := l.barrier(ctx); err != nil {
		return err
	}
	if mode == Migrate {
		if err := ctx.Err(); err != nil {
			l.release(nil, nil)
			return fmt.Errorf("ratelimit: update: %w", err)
		}
		// Submitted from here on: the outcome is observed whatever ctx does, bounded by the update
		// timeout alone.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.updateTimeout)
		err := cur.migrate(mctx, l.client, l.key, nc)
		cancel()
		if err != nil {
			if errors.Is(err, ErrConfigMismatch) || errors.Is(err, ErrDebtOverflow) || errors.Is(err, ErrForeignData) ||
				errors.Is(err, ErrNoPermission) {
				// Refused before writing: by the script's own checks, or by the ACL (the server's
				// NOPERM, or the script's check before its first write).
				l.release(nil, nil)
				return err
			}
			l.shutdown(fmt.Errorf("ratelimit: %w after a failed migration: %w", ErrClosed, err))
			l.release(nil, nil)
			return fmt.Errorf("ratelimit: migration failed, limiter closed: %w", err)
		}
	}
	l.release(nc, policy)
	return nil
}

// adopt publishes nc and p locally, without I/O, once the decisions in progress finish (the Adopt
// mode of Update without its compatibility check, for a Keyed's keys).
func (l *Limiter) adopt(ctx context.Context, nc *compiled, p Policy) error {
	if err := l.takeUpdateSlot(ctx); err != nil {
		return err
	}
	defer func() { <-l.updSem }()
	if err := l.barrier(ctx); err != nil {
		return err
	}
	l.release(nc, p)
	return nil
}

// takeUpdateSlot takes the limiter's one update slot (updSem), waiting until ctx ends or the limiter
// closes; the caller gives it back with <-l.updSem.
func (l *Limiter) takeUpdateSlot(ctx context.Context) error {
	select {
	case l.updSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ratelimit: update: %w", ctx.Err())
	case <-l.closeCtx.Done():
		return l.closedErr()
	}
}

// barrier stops new attempts and waits for active ones to finish. On error the barrier is released.
func (l *Limiter) barrier(ctx context.Context) error {
	l.mu.Lock()
	l.updating = true
	l.state.Add(updatingBit)
	for l.state.Load() != updatingBit && !l.closed {
		gate := l.gate
		l.mu.Unlock()
		var err error
		select {
		case <-gate:
		case <-ctx.Done():
			err = fmt.Errorf("ratelimit: update: %w", ctx.Err())
		}
		l.mu.Lock()
		if err != nil {
			l.updating = false
			l.state.Add(-updatingBit)
			l.openGateLocked()
			l.mu.Unlock()
			return err
		}
	}
	if l.closed {
		l.updating = false
		l.state.Add(-updatingBit)
		l.openGateLocked()
		err := l.closeErr
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	return nil
}

// release ends the barrier, publishing nc and p when nc is not nil, and then wakes the queue.
func (l *Limiter) release(nc *compiled, p Policy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if nc != nil {
		l.cur, l.pol = nc, p
		l.curP.Store(nc)
	}
	l.updating = false
	l.state.Add(-updatingBit)
	l.openGateLocked()
	if nc != nil && !l.closed {
		l.wakeQueueLocked(nc.capacity())
	}
}

// SetPolicy replaces the Keyed's settings with policy, keeping every key's usage. It does no I/O: it
// raises the policy version by one and publishes the new settings; each key is converted on its first
// decision afterwards, inside that decision's script (the rules are in the package documentation,
// "Updating the settings of a Keyed"). The algorithm cannot change ([ErrInvalidUpdate]) and policy
// must be valid ([ErrInvalidPolicy]), both checked before anything changes; equal settings (after
// rounding) change nothing. Keys with local state adopt the new settings once their decisions in
// progress finish: SetPolicy waits for that until ctx ends, then returns an error wrapping ctx.Err()
// (the new settings are published for every other key). Safe for concurrent use; calls are
// serialized. Unlike [Limiter.Update], there is no mode: every process converts keys lazily.
func (k *Keyed) SetPolicy(ctx context.Context, policy Policy) error {
	ctx, sc, err := k.cfg.hooks.Begin(ctx, op(opUpdate, k.cfg.instance))
	if err != nil {
		return err
	}
	err = k.setPolicy(ctx, policy)
	sc.End(err)
	return err
}

func (k *Keyed) setPolicy(ctx context.Context, policy Policy) error {
	nc, err := compile(clonePolicy(policy))
	if err != nil {
		return err
	}
	policy = nc.src // durations rounded up to whole µs
	k.updMu.Lock()
	defer k.updMu.Unlock()
	if k.isClosed() {
		return errClosed
	}
	cur, _ := k.current()
	if cur.algo != nc.algo {
		return fmt.Errorf("%w: %v to %v", ErrInvalidUpdate, cur.algo, nc.algo)
	}
	if cur.equal(nc) {
		return nil
	}
	k.version++
	kc := nc.keyedFor(k.version, k.base)
	k.settings.Store(&keyedSettings{c: kc, p: policy})
	k.mu.Lock()
	lims := make([]*Limiter, 0, len(k.entries))
	for _, e := range k.entries {
		lims = append(lims, e.lim)
	}
	k.mu.Unlock()
	for _, l := range lims {
		if err := l.adopt(ctx, kc, policy); err != nil && !errors.Is(err, ErrClosed) {
			return err
		}
	}
	return nil
}

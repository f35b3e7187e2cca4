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

// Update changes the limiter's settings at runtime, keeping the same key. mode must be [Migrate] or
// [Adopt] (the zero UpdateMode is invalid, so that no caller migrates by omission). policy must use
// the same algorithm (for a [Composite], the same number and algorithm of each component). An
// unknown mode or another algorithm returns an error wrapping [ErrInvalidUpdate], and an invalid
// policy one wrapping [ErrInvalidPolicy], all before any I/O, matching [ErrInvalidConfig], with the
// old settings kept. Settings identical after rounding are a no-op without I/O.
//
// Update is a local barrier: new attempts of this instance wait, attempts in progress finish, then
// with [Migrate] one script converts the stored usage to the new settings (see the package
// documentation for each algorithm's rule; an absent key stays absent), and the new settings are
// published together. With [Adopt] nothing is sent: use it on every other instance after one has
// migrated. Updates of one instance are serialized. A successful Update wakes the wait queue at once:
// waiting requests retry with the new settings, and those larger than the new capacity are rejected
// without RetryAfter. A queued request whose attempt is in flight during the Update keeps that
// attempt's admission; if the attempt was rejected, the request retries at once with the new settings
// (or is rejected without RetryAfter when larger than the new capacity).
//
// ctx is honoured while waiting to start (for another Update or for attempts in progress), and then
// the old settings stay usable. Once the migration script is sent, Update waits for its reply even if
// ctx ends, for at most [WithUpdateTimeout] (default 10s), and reports its outcome: a rejection by the
// script before writing ([ErrConfigMismatch], [ErrDebtOverflow], [ErrForeignData]) or by the ACL
// ([ErrNoPermission]: nothing written) keeps the old settings and queue; any other failure, including no reply within the update timeout (wrapping
// [ErrUncertain]), closes the limiter and fails its queued requests, because the server may already
// hold the migrated state
// (reconcile under your rollout barrier before building a replacement; do not blindly retry Migrate).
// Update returns [ErrClosed] on a closed limiter.
//
// Coordinate every process sharing the key (see the package documentation): exactly one migrates,
// the others adopt.
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
	select {
	case l.updSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("ratelimit: update: %w", ctx.Err())
	case <-l.closeCtx.Done():
		return l.closedErr()
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
	select {
	case l.updSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("ratelimit: update: %w", ctx.Err())
	case <-l.closeCtx.Done():
		return l.closedErr()
	}
	defer func() { <-l.updSem }()
	if err := l.barrier(ctx); err != nil {
		return err
	}
	l.release(nc, p)
	return nil
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

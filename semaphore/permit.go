package semaphore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// ReleaseOutcome is the result of [Permit.Release].
type ReleaseOutcome int

const (
	// Released: this call removed this owner's permit.
	Released ReleaseOutcome = iota + 1
	// AlreadyReleased: an earlier confirmed release on this handle (Release, Close, or the cleanup
	// after a failed Extend) already settled it; nothing was removed now.
	AlreadyReleased
	// NotOwned: the server holds no permit of this owner: it expired (and may have been replaced by
	// another owner's, which is left intact) or the key was deleted.
	NotOwned
)

// String returns "released", "already_released" or "not_owned".
func (o ReleaseOutcome) String() string {
	switch o {
	case Released:
		return "released"
	case AlreadyReleased:
		return "already_released"
	case NotOwned:
		return "not_owned"
	}
	return "ReleaseOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Permit is a held permit: a random owner token that is a member of the semaphore's sorted set. Its
// methods are safe for concurrent use.
//
// The handle keeps a conservative local estimate of the permit's life, measured from before the
// acquiring (or last renewing) request was sent. [Permit.Done] and [Permit.Context] end when that
// estimate elapses, when the server reports the permit gone, when a renewal fails after being sent, or
// on Release / Close: stop the protected work then.
type Permit struct {
	s     *Semaphore
	owner string

	ctx    context.Context
	cancel context.CancelCauseFunc
	op     chan struct{} // one slot: Extend and Release run one at a time

	mu          sync.Mutex
	ttl         time.Duration // 0: no expiry
	deadline    time.Time     // zero: no expiry
	timer       *time.Timer   // nil until a finite deadline is set
	released    bool          // the handle gave the permit up (IsReleased)
	settled     bool          // a release was answered: no I/O needed any more
	releaseSent bool          // a release may have reached the server
}

func newPermit(s *Semaphore, owner string, ttl time.Duration, start time.Time) *Permit {
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &Permit{s: s, owner: owner, ctx: ctx, cancel: cancel, op: make(chan struct{}, 1)}
	p.mu.Lock()
	p.setExpiryLocked(ttl, start)
	p.mu.Unlock()
	return p
}

// setExpiryLocked sets the TTL and the local deadline (start + ttl, none for NoExpiry).
func (p *Permit) setExpiryLocked(ttl time.Duration, start time.Time) {
	p.ttl = ttl
	if ttl == 0 {
		p.deadline = time.Time{}
		if p.timer != nil {
			p.timer.Stop()
		}
		return
	}
	p.deadline = start.Add(ttl)
	if p.timer == nil {
		p.timer = time.AfterFunc(time.Until(p.deadline), p.expire)
	} else {
		p.timer.Reset(time.Until(p.deadline))
	}
}

// expire runs when the local estimate may have elapsed; a renewal can have moved or removed it.
func (p *Permit) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil || p.deadline.IsZero() {
		return
	}
	if d := time.Until(p.deadline); d > 0 {
		p.timer.Reset(d)
		return
	}
	p.endLocked(ErrExpired)
}

// endLocked ends the handle's context with cause; p.mu must be held.
func (p *Permit) endLocked(cause error) {
	if p.ctx.Err() == nil {
		p.cancel(cause)
	}
	if p.timer != nil {
		p.timer.Stop()
	}
}

// expiredLocked reports whether the local estimate elapsed; p.mu must be held.
func (p *Permit) expiredLocked() bool {
	return !p.deadline.IsZero() && !time.Now().Before(p.deadline)
}

func (p *Permit) lockOp(ctx context.Context) error {
	select {
	case p.op <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Permit) unlockOp() { <-p.op }

// OwnerToken returns the random 128-bit owner token (32 hex characters): the permit's member in the
// sorted set. Keep it private: never log it or use it as a metric attribute.
func (p *Permit) OwnerToken() string { return p.owner }

// TTL returns the permit's current lifetime, truncated to whole milliseconds; [NoExpiry] for a permit
// that lasts until released.
func (p *Permit) TTL() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ttl
}

// Deadline returns the local estimate of when the permit ends (the send time of the acquiring or last
// successful renewing request plus the TTL), or the zero time for a permit without expiry.
func (p *Permit) Deadline() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deadline
}

// Remaining returns the conservative local estimate of the permit's remaining life, measured from when
// the acquiring or last renewing command was sent: [Forever] for a held permit without expiry, zero once
// the estimate elapsed or the handle ended (released, surrendered, lost).
func (p *Permit) Remaining() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil || p.released {
		return 0
	}
	if p.deadline.IsZero() {
		return Forever
	}
	return max(0, time.Until(p.deadline))
}

// IsReleased reports whether the handle gave the permit up: Release or Close was called, a renewal
// failed after being sent (the permit was surrendered), or the server reported it gone. A released
// handle's Extend and Verify return false without I/O.
func (p *Permit) IsReleased() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released
}

// Done returns a channel closed when the handle stops vouching for the permit; [Permit.Err] says why.
func (p *Permit) Done() <-chan struct{} { return p.ctx.Done() }

// Context returns a context cancelled when [Permit.Done] closes; context.Cause gives the reason
// ([ErrExpired], [ErrLost], [ErrSurrendered] or [ErrReleased]). Derive the protected work's context
// from it.
func (p *Permit) Context() context.Context { return p.ctx }

// Err returns nil while the handle vouches for the permit, then [ErrExpired], [ErrLost],
// [ErrSurrendered] or [ErrReleased].
func (p *Permit) Err() error {
	if p.ctx.Err() == nil {
		return nil
	}
	return context.Cause(p.ctx)
}

// Extend resets the permit's expiry to ttl from now on the server clock (renewing it, or changing its
// lifetime; [NoExpiry] makes it last until released), only if this owner still holds it. The capacity is
// not checked: a renewal never fails because the capacity was lowered.
//
// It returns (true, nil) when reset: the local estimate becomes send time + ttl. It returns (false, nil)
// without I/O when the handle is released or its local estimate elapsed, and (false, nil) when the server
// holds no permit of this owner (the handle ends with [ErrLost]). When the local estimate elapses while
// the renewal is in flight, it returns (false, nil) and surrenders the permit as below (the server may
// have renewed it).
//
// Failure rules:
//   - ttl invalid ([ErrInvalidTTL]) or ctx ending while waiting for another Extend / Release on this
//     handle: the error is returned and nothing changes.
//   - Once sent, any failure (an error wrapping [ErrUncertain], or a server error): the permit is
//     surrendered. IsReleased becomes true, Remaining 0, Err [ErrSurrendered], later Extends return
//     false; an owner-token release bounded by the cleanup timeout is sent (and retried in the
//     background). The permit's lifetime on the server is unknown until that release lands: acquire
//     a new permit.
func (p *Permit) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	ms, ttl, err := ttlArg(ttl)
	if err != nil {
		return false, err
	}
	if err := p.lockOp(ctx); err != nil {
		return false, fmt.Errorf("semaphore: extend: %w", err)
	}
	defer p.unlockOp()
	p.mu.Lock()
	if p.released || p.ctx.Err() != nil || p.expiredLocked() {
		p.mu.Unlock()
		return false, nil
	}
	p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("semaphore: extend: %w", err)
	}

	start := time.Now()
	n, err := extendScript.Exec(ctx, p.s.client, []string{p.s.key}, []string{p.owner, ms}).AsInt64()
	if err != nil {
		p.mu.Lock()
		p.released = true
		p.releaseSent = true
		p.endLocked(ErrSurrendered)
		p.mu.Unlock()
		if p.s.cleanup(ctx, p.owner, stageExtend) {
			p.mu.Lock()
			p.settled = true
			p.mu.Unlock()
		}
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("%w: extend: %w (permit surrendered)", ErrUncertain, err)
		}
		return false, fmt.Errorf("semaphore: extend: %w (permit surrendered)", err)
	}
	p.mu.Lock()
	if n != 1 {
		p.released = true
		p.endLocked(ErrLost)
		p.mu.Unlock()
		return false, nil
	}
	if p.released {
		// Closed or released while the renewal was in flight: that release follows this renewal and
		// removes the permit.
		p.mu.Unlock()
		return false, nil
	}
	if p.ctx.Err() != nil {
		// The local estimate elapsed while the renewal was in flight: the server renewed the permit
		// (with NoExpiry, for good) but the handle can no longer vouch for it and reports false, so
		// nobody would release it. Surrender it like a failed renewal: owner-token release now,
		// retried in the background.
		p.released = true
		p.releaseSent = true
		p.mu.Unlock()
		if p.s.cleanup(ctx, p.owner, stageExtend) {
			p.mu.Lock()
			p.settled = true
			p.mu.Unlock()
		}
		return false, nil
	}
	defer p.mu.Unlock()
	p.setExpiryLocked(ttl, start)
	return true, nil
}

// Verify asks the server whether this owner holds an active permit at this instant; it cannot vouch for
// any later moment and does not renew. It prunes expired permits, so it runs on the primary and needs
// write permission.
//
// It returns (true, nil) when held, (false, nil) when not (the handle ends with [ErrLost]), and
// (false, nil) without I/O on a released handle. A failed or uncertain verification returns the error
// and leaves the permit held and the handle unchanged: retry it.
func (p *Permit) Verify(ctx context.Context) (bool, error) {
	if p.IsReleased() {
		return false, nil
	}
	n, err := verifyScript.Exec(ctx, p.s.client, []string{p.s.key}, []string{p.owner}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("%w: verify: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("semaphore: verify: %w", err)
	}
	if n == -2 {
		p.mu.Lock()
		p.released = true
		p.endLocked(ErrLost)
		p.mu.Unlock()
		return false, nil
	}
	return true, nil
}

// Release removes this owner's permit; other owners' permits are never touched. It ends the handle with
// [ErrReleased] whatever the outcome, and sends one owner-token release bounded by ctx and the cleanup
// timeout.
//
// Outcomes: [Released] when this call removed the permit; [AlreadyReleased] when an earlier release on
// this handle was confirmed (no I/O); [NotOwned] when the permit expired or the key was deleted. When
// the release is unconfirmed it returns an error wrapping [ErrUncertain] (or the server error): whether
// this owner still holds a permit is unknown. Use the handle only to call Release again; nothing is
// retried in the background (use [Permit.Close] for that). If ctx ends while waiting for another
// Extend / Release on this handle, nothing is sent and the handle is unchanged.
func (p *Permit) Release(ctx context.Context) (ReleaseOutcome, error) {
	if err := p.lockOp(ctx); err != nil {
		return 0, fmt.Errorf("semaphore: release: %w", err)
	}
	defer p.unlockOp()
	p.mu.Lock()
	if p.settled {
		p.endLocked(ErrReleased)
		p.mu.Unlock()
		return AlreadyReleased, nil
	}
	retry := p.releaseSent
	p.releaseSent = true
	p.released = true
	p.endLocked(ErrReleased)
	p.mu.Unlock()

	rctx, cancel := context.WithTimeout(ctx, p.s.cfg.releaseTimeout)
	defer cancel()
	n, err := releaseScript.Exec(rctx, p.s.client, []string{p.s.key}, []string{p.owner}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return 0, fmt.Errorf("%w: release: %w", ErrUncertain, err)
		}
		return 0, fmt.Errorf("semaphore: release: %w", err)
	}
	p.mu.Lock()
	p.settled = true
	p.mu.Unlock()
	switch {
	case n == 1:
		return Released, nil
	case retry:
		return AlreadyReleased, nil
	default:
		return NotOwned, nil
	}
}

// Close releases the permit on a best-effort basis and never returns an error to act on: it always
// returns nil (it exists so that a Permit is an io.Closer). It ends the handle with [ErrReleased], sends
// an owner-token release and waits for it up to the cleanup timeout (about 1s), then, if unconfirmed,
// retries in the background with jittered backoff for up to the retry window (about 1 minute) before
// giving up, counting [MetricCleanupAbandoned] and logging a warning. [Semaphore.Shutdown] waits for
// or stops those retries. Close after a confirmed release does no I/O.
func (p *Permit) Close() error {
	p.mu.Lock()
	if p.settled {
		p.endLocked(ErrReleased)
		p.mu.Unlock()
		return nil
	}
	p.released = true
	p.releaseSent = true
	p.endLocked(ErrReleased)
	p.mu.Unlock()
	if p.s.cleanup(context.Background(), p.owner, stageClose) {
		p.mu.Lock()
		p.settled = true
		p.mu.Unlock()
	}
	return nil
}

package ratelimit

// This file holds the waits of WaitN: the loop without a queue and the errors of a wait that ends
// without admission. The queued wait is in queue.go.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Wait is WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) (Result, error) { return l.WaitN(ctx, 1) }

// WaitN waits until n permits are admitted, ctx ends, or the request can never be admitted (see the
// package documentation, "Waiting"). Unlike [Limiter.AllowN], it returns an error whenever it returns
// without admission: [ErrExceedsCapacity], [ErrDenied], [ErrQueueFull] (only with [WithQueue]), or one
// wrapping ctx.Err(), with the last decision's Result (Allowed false) or the zero Result, so
// golang.org/x/time/rate's "proceed when err is nil" is safe. It sleeps each rejection's
// server-computed RetryAfter with a timer and decides again in one round trip (with WithQueue, in the
// local queue); when the next admission would come after ctx's deadline it returns at once with an
// error wrapping context.DeadlineExceeded. An error after ctx ended or Close ([ErrClosed]) while a
// retry was in flight also wraps [ErrUncertain]: that script may still consume the permits. Other
// errors are those of AllowN. Each call counts once in [Stats] and the metrics, however many retries
// it took.
func (l *Limiter) WaitN(ctx context.Context, n int64) (Result, error) {
	ctx, sc, err := l.hooks.Begin(ctx, op(opAcquire, l.inst))
	if err != nil {
		return Result{}, err
	}
	res, err := l.waitN(ctx, n)
	endDecision(&sc, err)
	return res, err
}

// waitN is WaitN without admission (the per-key limiters of a Keyed use it).
func (l *Limiter) waitN(ctx context.Context, n int64) (Result, error) {
	if n < 0 {
		return Result{}, ErrNegativePermits
	}
	if err := l.begin(); err != nil {
		return Result{}, err
	}
	defer l.end()
	var res Result
	var err error
	queued := l.queueLimit > 0
	if !queued {
		res, err = waitLoop(ctx, l.closeCtx, l.closedErr, func() (Result, error) { return l.attempt(ctx, n, true, nil) })
	} else {
		res, err = l.wait(ctx, n)
	}
	if err != nil {
		return res, err
	}
	if !res.Allowed {
		err = notAdmitted(res, n, l.current().capacity(), queued)
	}
	l.m.record(l.st, res)
	return res, err
}

// Errors of a [Limiter.WaitN] or [Keyed.WaitN] that returns without admission. AllowN reports the
// same situations as rejections (Allowed false, with the Reason), not as errors.
var (
	// ErrExceedsCapacity: n is above the policy's capacity (the smallest component limit of a
	// composite), so no wait can admit it. Returned at once, without waiting: before any I/O for the
	// limiter's own capacity, or on the first decision whose Limit is below n (a [Keyed] key decided
	// by stored settings of a higher policy version with a smaller capacity).
	ErrExceedsCapacity = errors.New("ratelimit: request exceeds the capacity")
	// ErrDenied: the identity is on the bound deny list ([WithDenyList], [WithKeyedDenyList]).
	ErrDenied = errors.New("ratelimit: identity is on the deny list")
	// ErrQueueFull: the local wait queue ([WithQueue]) had no room (OldestFirst), evicted the
	// request (NewestFirst), or the request was larger than the queue limit and not admitted at once
	// (but not above the capacity: that is ErrExceedsCapacity). Never returned without a queue.
	ErrQueueFull = errors.New("ratelimit: wait queue full")
)

// notAdmitted is the error of a wait that ends with the rejection res of n permits under a policy
// of the given capacity, queued telling whether the wait used a queue. n above the capacity, or above
// the Limit of the decision (the capacity of the settings the server applied: a Keyed follows stored
// settings of a higher version, which may be smaller than its own), can never be admitted. Without a
// queue nothing else ends a wait without admission (a rejection without RetryAfter is one that no
// retry can admit); with one, the rest are the queue's own rejections.
func notAdmitted(res Result, n, capacity int64, queued bool) error {
	switch {
	case res.Reason == ReasonDenyList:
		return ErrDenied
	case n > capacity || neverAdmissible(res, n) || !queued:
		return ErrExceedsCapacity
	}
	return ErrQueueFull
}

// neverAdmissible reports whether the capacity rejection res shows that n permits can never be
// admitted: n is above the Limit of the settings the decision applied (the controlling component's
// for a composite).
func neverAdmissible(res Result, n int64) bool {
	return !res.Allowed && res.Reason == ReasonCapacity && res.Limit > 0 && n > res.Limit
}

// pastDeadlineError is a wait that returned before the caller's deadline because its next admission
// (in d) would come after it. It wraps context.DeadlineExceeded; its hook outcome is canceled, as if
// the wait had slept until the deadline.
type pastDeadlineError struct{ d time.Duration }

func (e pastDeadlineError) Error() string {
	return fmt.Sprintf("ratelimit: wait: admission in %v would be after the context deadline: %v", e.d, context.DeadlineExceeded)
}

func (pastDeadlineError) Unwrap() error { return context.DeadlineExceeded }

// Is makes errors.Is(err, errPastDeadline) find a pastDeadlineError without allocating.
func (pastDeadlineError) Is(target error) bool { return target == errPastDeadline }

// errPastDeadline is the target that matches any pastDeadlineError.
var errPastDeadline = errors.New("ratelimit: wait: admission would be after the context deadline")

// waitLoop is the wait without a queue: attempt until admitted, sleeping each rejection's
// RetryAfter with a timer. It returns a rejection that can never be admitted (deny list, no
// RetryAfter: n above the capacity or above the Limit of the decision, see compiled.run) as it is,
// for the caller to turn into an error.
func waitLoop(ctx, closeCtx context.Context, closedErr func() error, attempt func() (Result, error)) (Result, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		res, err := attempt()
		if err != nil || res.Allowed || res.Reason != ReasonCapacity || res.RetryAfter <= 0 {
			return res, err
		}
		d := res.RetryAfter
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return res, pastDeadlineError{d}
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return res, fmt.Errorf("ratelimit: wait: %w", ctx.Err())
		case <-closeCtx.Done():
			return res, closedErr()
		}
	}
}

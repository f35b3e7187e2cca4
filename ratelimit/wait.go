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

// WaitN waits until n permits are admitted, ctx ends, or the request can never be admitted; unlike
// [Limiter.AllowN], a WaitN that returns without admission always returns an error (so the usual
// golang.org/x/time/rate pattern "proceed when err is nil" is safe). On such an error the Result is
// the last decision (Allowed false) when there was one, the zero Result otherwise.
//
// Without a queue ([WithQueue] not given, or a limit of 0) each rejection's server-computed
// RetryAfter is slept with a timer (never polling) and the request is decided again in one round
// trip, until admitted. When the sleep would end after ctx's deadline, WaitN returns at once with an
// error wrapping context.DeadlineExceeded instead of sleeping in vain. Other processes can take the
// capacity first: each retry is a new decision.
//
// With a queue, a request that is not admitted, could be admitted later (positive RetryAfter) and
// fits in the queue (n is at most the queue limit) waits for the server-computed RetryAfter (a
// timer, never polling) and retries with one atomic attempt, until admitted. Waiting requests are
// served one at a time in the queue's order (OldestFirst or NewestFirst); while requests wait, a new
// WaitN joins the queue instead of deciding first. When the queue is full, OldestFirst rejects the
// new request and NewestFirst evicts the oldest waiting requests to make room; those requests fail
// with [ErrQueueFull] (so does a request larger than the queue limit that is not admitted at once).
// A queued request rechecks the deny list before every retry and leaves the queue when denied. An
// [Limiter.Update] wakes the queue at once: waiting requests retry with the new settings, and those
// larger than the new capacity fail with [ErrExceedsCapacity]. The queue is local: other processes,
// and other local callers between retries, can take permits first.
//
// Errors for a request that is not admitted: [ErrExceedsCapacity] when n is above the capacity (no
// retry can succeed): at once, before any I/O, for the limiter's own capacity, and on the first
// rejection whose Limit is below n for the settings the server applied ([Keyed] keys stored with a
// higher policy version are decided by their stored settings, whose capacity may be smaller; a
// composite's reply carries the limit of its controlling component), with no further retry, also
// with a queue and also when n is above the queue limit; [ErrDenied] when the identity is on the
// bound deny list; [ErrQueueFull] only for the queue's own rejections, as above (never without a
// queue). If ctx ends while waiting, WaitN returns an error wrapping ctx.Err(), and
// also [ErrUncertain] when a retry was in flight (its script may still consume the permits). Close
// fails waiting requests with [ErrClosed] (also wrapping ErrUncertain for a retry in flight). Other
// errors are those of AllowN. Each call that ends with a decision counts once in [Stats] and the
// metrics (a rejection when it fails with one of the three errors above), however many retries it
// took.
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

package idempotency

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// The causes with which [Store.KeepAlive]'s context ends when the claim can no longer be vouched for
// (context.Cause reports them). They are luakit's shared values.
var (
	ErrLost    = luakit.ErrLost    // a renewal found no pending claim of this owner: it expired, was abandoned, replaced or completed
	ErrExpired = luakit.ErrExpired // no renewal was confirmed before the local estimate of the lease elapsed
)

// KeepAlive renews the pending claim of a Started attempt a (from [Store.TryBegin] or [Store.Begin]
// on key) in the background while work runs, and returns a context for that work and a stop function.
//
// It renews for a.Lease ([Store.Extend]) a.Lease/3 after the last confirmed renewal (or the
// claim), at once when less than that is left (the schedule of every owner-token hold,
// ownership.RenewalDue), tracking a local estimate of the lease
// (a.Deadline, then the estimate from the send time of the last confirmed renewal, as [Attempt]'s
// Deadline is computed). The returned context is derived from ctx and is cancelled, with
// context.Cause reporting why, when:
//
//   - a renewal finds no pending claim of this owner: cause [ErrLost] (expired, abandoned, replaced by
//     another caller after expiry, or completed);
//   - the server refuses a renewal for good (a terminal error, see [luakit.Classify]: NOPERM when the
//     ACL refuses a command of the renewal): the cause is that error, so
//     errors.Is(context.Cause(work), ErrNoPermission) reports an ACL refusal. No retry could succeed,
//     so the work is stopped at once instead of when the estimate elapses. Nothing was renewed: the
//     claim expires after its lease;
//   - no renewal is confirmed before the estimate elapses (failed or uncertain renewals are retried
//     every [WithRetryDelay], at most a quarter of the period): cause [ErrExpired]; a duplicate may
//     then start, so stop the work;
//   - ctx ends (renewals stop; the claim then expires after its lease), or stop is called.
//
// KeepAlive never abandons or completes the claim. stop ends renewing, waits for the renewing
// goroutine to exit (so no renewal is in flight from it afterwards, except one whose reply it stopped
// waiting for, which is harmless: renewals are owner-checked and never touch a completed or newer
// claim) and cancels the context; it is idempotent. Call stop, then [Store.Complete] or
// [Store.Abandon]. To keep renewing while work ignores a cancelled request (an HTTP handler whose
// client left), pass context.WithoutCancel(ctx) and watch the request separately.
//
// Errors, before anything starts (no goroutine, no I/O): an error matching luakit.ErrInvalidConfig
// when a is not Started, its token is malformed ([ErrInvalidToken]), its lease is under 1ms or its
// Deadline is zero, or key is empty. A Deadline already in the past ends the context at once
// ([ErrExpired]). KeepAlive itself does not block; it starts one goroutine, which ends by stop, ctx or loss.
// Safe for concurrent use.
func (s *Store) KeepAlive(ctx context.Context, key string, a Attempt) (context.Context, context.CancelFunc, error) {
	if a.State != Started {
		return nil, nil, luakit.InvalidConfig("idempotency", "keep-alive needs a started attempt (got %v)", a.State)
	}
	k, secret, gen, err := s.prepareOwned(key, a.OwnerToken)
	if err != nil {
		return nil, nil, err
	}
	ms, err := millis("claim lease", a.Lease)
	if err != nil {
		return nil, nil, err
	}
	if a.Deadline.IsZero() {
		return nil, nil, luakit.InvalidConfig("idempotency", "keep-alive needs the attempt's Deadline")
	}
	kctx, cancel := context.WithCancelCause(ctx)
	// rctx bounds renewing: it ends with kctx or when stop is called.
	rctx, quit := context.WithCancel(kctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.keepAlive(rctx, cancel, k, secret, gen, ms, a.Deadline)
	}()
	var once sync.Once
	stop := func() {
		once.Do(quit)
		<-done
		cancel(context.Canceled)
	}
	return kctx, stop, nil
}

// keepAlive renews until ctx ends (stop, or the caller's ctx) or the claim can no longer be vouched
// for, which it reports through end.
func (s *Store) keepAlive(ctx context.Context, end context.CancelCauseFunc, k, secret, gen string, ms int64, deadline time.Time) {
	lease := time.Duration(ms) * time.Millisecond
	retry := max(min(max(lease/3, time.Millisecond)/4, s.cfg.own.RetryDelay), time.Millisecond)
	// Renewals follow the estimate, as every owner-token hold's (ownership.RenewalDue): a keep-alive
	// started late renews at once.
	next := time.NewTimer(ownership.RenewalDue(deadline, lease, 1.0/3))
	defer next.Stop()
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			end(ErrExpired)
			return
		case <-next.C:
		}
		// Bounded by the estimate and by stop; sent without a socket deadline so that giving up on
		// the reply keeps the shared connection.
		rctx, cancel := context.WithDeadline(ctx, deadline)
		ectx, stopDL := luakit.WithoutDeadline(rctx)
		start := time.Now()
		held, admitted, err := s.renew(ectx, k, secret, gen, ms)
		stopDL()
		cancel()
		switch {
		case err == nil && !held:
			end(ErrLost)
			return
		case err == nil && !time.Now().Before(deadline):
			// Confirmed too late: a duplicate may have started meanwhile.
			end(ErrExpired)
			return
		case err == nil:
			deadline = estimate(start, ms)
			expiry.Reset(time.Until(deadline))
			next.Reset(ownership.RenewalDue(deadline, lease, 1.0/3))
		default:
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrForeignData) {
				end(ErrLost) // someone overwrote the key: the claim is gone
				return
			}
			if admitted && luakit.IsTerminal(err) && !errors.Is(err, ErrUncertain) {
				// Refused by the server (NOPERM...): no retry can succeed, so end with that error
				// instead of retrying until the estimate elapses (as ownership's keep-alive does).
				end(err)
				return
			}
			next.Reset(retry)
		}
	}
}

// renew is one keep-alive renewal, admitted as its own IDEMPOTENCY EXTEND with the keep-alive's
// context. A rejection is returned as the renewal's error with admitted false: it is no answer of the
// server, whatever its class, so it is retried.
func (s *Store) renew(ctx context.Context, k, secret, gen string, ms int64) (held, admitted bool, err error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opExtend))
	if err != nil {
		return false, false, err
	}
	held, err = s.extend(ctx, k, secret, gen, ms)
	sc.End(err)
	return held, true, err
}

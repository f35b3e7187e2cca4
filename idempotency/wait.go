package idempotency

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Begin is [Store.TryBegin] that waits while another owner's claim with the same fingerprint is in
// progress, instead of returning InProgress at once. It returns when the original completes (Completed,
// with its result), when the key becomes free because the original was abandoned or expired (Started:
// this caller now owns a new claim), on FingerprintMismatch, or when ctx ends.
//
// With [WithTracker] on a RESP3 client with client-side caching it waits without polling: it wakes on
// the invalidation of the claim key (a completion, abandonment or expiry) and at the claim's PTTL
// deadline. Without a tracker it re-checks every [WithRecheckInterval] and at the PTTL deadline.
// Transient server errors (the script did not run) are retried after [WithRetryDelay]; other errors,
// including uncertain ones, end the wait at once.
//
// When ctx ends while waiting it returns an error wrapping ctx.Err() (and [ErrUncertain] if an
// attempt was in flight; such an unreturned claim expires after lease). Arguments and other errors as
// for TryBegin.
func (s *Store) Begin(ctx context.Context, key string, lease time.Duration, fp Fingerprint) (res Attempt, err error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opBegin))
	if err != nil {
		return Attempt{}, err
	}
	defer func() { sc.End(err) }()
	k, ms, err := s.prepare(key, lease)
	if err != nil {
		return Attempt{}, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return Attempt{}, fmt.Errorf("idempotency: begin: %w", err)
		}
		var watch *luakit.Watch
		if s.cfg.tracker != nil {
			// Register before any read so that no invalidation after it is missed.
			watch = s.cfg.tracker.Watch(k)
		}
		a, err := s.begin(ctx, k, ms, fp)
		var wait time.Duration
		switch {
		case err == nil && a.State != InProgress:
			if watch != nil {
				watch.Stop()
			}
			return a, nil
		case err == nil:
			wait = a.Remaining + time.Millisecond
			if a.Remaining <= 0 {
				// A claim reported without time left (one written without expiry by hand or by an
				// older client): re-check at the recheck interval, never in a tight loop.
				wait = s.cfg.recheck
			}
			if watch != nil {
				// Arm tracking on this connection; if the claim vanished meanwhile, retry now.
				exists, apttl, aerr := luakit.Arm(ctx, s.client, k)
				switch {
				case aerr != nil && ctx.Err() != nil:
					watch.Stop()
					return Attempt{}, fmt.Errorf("idempotency: begin: %w", ctx.Err())
				case aerr != nil:
					// Tracking unavailable for now: fall back to re-checking.
					wait = min(wait, s.cfg.recheck)
				case !exists:
					wait = 0
				case apttl >= 0 && apttl+time.Millisecond < wait:
					wait = apttl + time.Millisecond
				}
			} else {
				wait = min(wait, s.cfg.recheck)
			}
		case luakit.IsTransient(err):
			wait = s.cfg.retryDelay
		default:
			if watch != nil {
				watch.Stop()
			}
			return Attempt{}, err
		}
		if wait <= 0 {
			if watch != nil {
				watch.Stop()
			}
			continue
		}
		_ = luakit.Sleep(ctx, watch, wait) // a ctx error is reported at the top of the loop
	}
}

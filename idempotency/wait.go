package idempotency

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Begin is [Store.TryBegin] that waits while another owner's claim with the same fingerprint is in
// progress, instead of returning InProgress at once. It returns when the original completes (Completed,
// with its result), when the key becomes free because the original was abandoned or expired (Started:
// this caller now owns a new claim), on FingerprintMismatch, or when ctx ends.
//
// It waits as every Coordkit acquisition does (the contract's waiting rows, in package
// github.com/coordkit/coordkit/luakit/ownership): it sleeps until the claim key is invalidated (a
// completion, abandonment, expiry or renewal) or the claim's lease would end, then runs the claim
// script again; nothing is sent while it sleeps (which tracker wakes it, and how late it wakes
// without one: see the package documentation, "Servers"). Transient server errors and refused
// connections (the script did not run) are retried after [WithRetryDelay]; other errors, including
// uncertain ones, end the wait at once. When ctx ends while waiting it returns an error wrapping
// ctx.Err() (and [ErrUncertain] if an attempt was in flight; such an unreturned claim expires after
// lease). Arguments and other errors as for TryBegin.
func (s *Store) Begin(ctx context.Context, key string, lease time.Duration, fp Fingerprint) (Attempt, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opBegin))
	if err != nil {
		return Attempt{}, err
	}
	v, err := s.beginOp(ctx, key, lease, fp)
	sc.End(err)
	return v, err
}

// beginOp is [Store.Begin], run inside its hook scope.
func (s *Store) beginOp(ctx context.Context, key string, lease time.Duration, fp Fingerprint) (res Attempt, err error) {
	k, ms, err := s.prepare(key, lease)
	if err != nil {
		return Attempt{}, err
	}
	track := s.waiter.Tracking() // each attempt arms tracking with its own reads where it can
	final := false               // the error ending the wait is an attempt's
	err = s.waiter.Wait(ctx, k, func(ctx context.Context) ownership.TryResult {
		a, holderTTL, tracked, err := s.begin(ctx, k, ms, fp, track)
		switch {
		case err == nil && a.State == InProgress:
			return ownership.TryResult{Busy: true, HolderTTL: holderTTL, Tracked: tracked}
		case err == nil:
			res = a
			return ownership.TryResult{}
		case luakit.IsTransient(err):
			return ownership.TryResult{Retry: true}
		default:
			final = true
			return ownership.TryResult{Err: err}
		}
	})
	switch {
	case err == nil:
		return res, nil
	case !final && ctx.Err() != nil:
		// ctx ended between attempts (the Waiter names the operation "acquire").
		return Attempt{}, fmt.Errorf("idempotency: begin: %w", ctx.Err())
	}
	return Attempt{}, err
}

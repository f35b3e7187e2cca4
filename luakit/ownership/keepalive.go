package ownership

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// KeepAlive starts renewing the hold in the background until ctx ends, [Handle.Release] is called, or
// the handle ends, on the schedule and with the outcomes of the package documentation's rows
// "KeepAlive ...". It returns at once: [luakit.ErrKeepAliveRunning] if a keep-alive already runs (one
// whose ctx ended no longer counts), the handle's cause ([Handle.Err]) if it already ended, else nil
// (also, starting nothing, on a hold without expiry). A confirmed [Handle.ExtendTTL] from any
// goroutine re-arms the schedule. Ending ctx stops renewing without releasing; Release stops it and
// waits until no renewal of the handle is in flight, so none is sent after Release returns.
//
// KeepAlive starts no goroutine of its own: the handle is queued on the keep-alive scheduler shared by
// every handle of its Config (one primitive factory, holding one client). That scheduler has one
// timer goroutine, running only while some handle of the Config keeps alive, and at most
// [MaxRenewalsInFlight] renewals in flight, each on a goroutine that ends with it; renewals due
// together are sent concurrently, so the client's auto-pipelining batches them into few writes. A
// handle keeping alive costs a few fixed fields, and, for a ctx that can end, one registration with
// it (context.AfterFunc).
//
// ctx may be this handle's own [Handle.Context] (renew for as long as the handle lives), or another
// handle's.
//
// KeepAlive is not a hook operation; with Config.Hooks each renewal is admitted as its own
// "<NAME> EXTEND" with ctx, and a rejected one is handled like a failed one.
func (h *Handle) KeepAlive(ctx context.Context) error {
	if hc, ok := ctx.(handleContext); ok {
		// A handle's Context (this one's, or another's): its Done and Err take that handle's mutex,
		// which the keep-alive's bookkeeping may hold, so watch the plain context underneath, which
		// is cancelled when that handle ends.
		ctx = hc.Context
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.vouchingLocked() {
		return h.cause
	}
	if h.kaActive {
		if h.kaCtx.Err() == nil {
			return luakit.ErrKeepAliveRunning
		}
		h.stopKeepAliveLocked(true) // its ctx ended: it is stopping anyway
	}
	if h.ttl == 0 {
		return nil
	}
	s := acquireScheduler(h.cfg)
	gen := h.kaGen.Add(1)
	h.kaSched, h.kaCtx, h.kaActive = s, ctx, true
	if ctx.Done() != nil {
		h.kaStopCtx = context.AfterFunc(ctx, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.kaActive && h.kaGen.Load() == gen {
				h.stopKeepAliveLocked(true)
			}
		})
	}
	s.push(h, time.Now().Add(h.nextRenewalLocked()))
	return nil
}

// stopKeepAliveLocked stops a running keep-alive: it is taken off its scheduler's queue, and a renewal
// of it in flight is cancelled when cancel is set (see stopKeepAlive to wait for that renewal). h.mu
// must be held.
func (h *Handle) stopKeepAliveLocked(cancel bool) {
	if cancel && h.kaCancel != nil {
		h.kaCancel() // also a renewal left to finish by an earlier stop (the handle ended)
		h.kaCancel = nil
	}
	if !h.kaActive {
		return
	}
	h.kaActive = false
	h.kaGen.Add(1)
	h.kaSched.remove(h)
	if h.kaStopCtx != nil {
		h.kaStopCtx()
		h.kaStopCtx = nil
	}
	h.kaCtx = nil
	releaseScheduler(h.kaSched)
}

// stopKeepAlive stops a running keep-alive and waits until no renewal of h is in flight.
func (h *Handle) stopKeepAlive() {
	h.mu.Lock()
	h.stopKeepAliveLocked(true)
	// The queue removal above synchronised with the scheduler (its mutex): a renewal popped before it
	// is counted in kaInFlight by now.
	for h.kaInFlight.Load() > 0 {
		if h.kaIdle == nil {
			h.kaIdle = make(chan struct{})
		}
		idle := h.kaIdle
		h.mu.Unlock()
		<-idle
		h.mu.Lock()
	}
	h.mu.Unlock()
}

// renewRound is one keep-alive round of h, run by scheduler s on a worker goroutine for the
// keep-alive numbered gen: one renewal, then h queued again on s for the next one (or the retry), or
// the keep-alive stopped (ctx ended, loss, expiry, terminal refusal).
func (h *Handle) renewRound(s *scheduler, gen uint32) {
	defer h.leaveRound()
	h.mu.Lock()
	if !h.kaActive || h.kaGen.Load() != gen {
		h.mu.Unlock()
		return // stopped after the scheduler took it
	}
	kctx := h.kaCtx
	if kctx.Err() != nil {
		h.stopKeepAliveLocked(true)
		h.mu.Unlock()
		return
	}
	if !h.vouchingLocked() || h.deadline.IsZero() {
		h.stopKeepAliveLocked(true) // ended (endLocked stopped it already) or made non-expiring
		h.mu.Unlock()
		return
	}
	rctx, cancel := context.WithDeadline(kctx, h.deadline)
	h.kaCancel = cancel
	h.mu.Unlock()

	ok, admitted, err := h.renew(rctx)
	cancel()

	h.mu.Lock()
	h.kaCancel = nil
	if !h.kaActive || h.kaGen.Load() != gen {
		h.mu.Unlock()
		return // stopped while the renewal was in flight
	}
	var next time.Duration
	switch {
	case err == nil && ok:
		next = h.nextRenewalLocked()
	case err == nil:
		h.stopKeepAliveLocked(true) // lost or expired: the handle has ended
		h.mu.Unlock()
		return
	default:
		if kctx.Err() != nil {
			h.stopKeepAliveLocked(true)
			h.mu.Unlock()
			return
		}
		if admitted && luakit.IsTerminal(err) && !errors.Is(err, luakit.ErrUncertain) {
			// Refused by the server (NOPERM, WRONGTYPE...): no retry can succeed, so end the
			// handle with that error instead of retrying until the estimate elapses.
			h.endLocked(err)
			h.mu.Unlock()
			return
		}
		if !h.vouchingLocked() {
			h.mu.Unlock()
			return
		}
		remaining := time.Until(h.deadline)
		period := max(time.Duration(float64(h.ttl)*h.cfg.renewFraction()), time.Millisecond)
		next = max(min(period/4, h.cfg.retryDelay()), time.Millisecond)
		s.push(h, time.Now().Add(next))
		h.mu.Unlock()
		h.cfg.logger().LogAttrs(context.Background(), slog.LevelWarn,
			"coordkit/"+h.cfg.name()+": renewal failed; retrying",
			slog.Bool("uncertain", errors.Is(err, luakit.ErrUncertain)), slog.String("error", err.Error()),
			slog.Duration("remaining", remaining))
		return
	}
	s.push(h, time.Now().Add(next))
	h.mu.Unlock()
}

// leaveRound ends a round: one renewal fewer in flight, waking a Release waiting for none.
func (h *Handle) leaveRound() {
	h.mu.Lock()
	if h.kaInFlight.Add(-1) == 0 && h.kaIdle != nil {
		close(h.kaIdle)
		h.kaIdle = nil
	}
	h.mu.Unlock()
}

// renew is one keep-alive renewal at the current TTL, admitted as "<NAME> EXTEND". admitted is false
// when a hook rejected it: the rejection is no answer of the server, whatever its class, so the caller
// retries it.
func (h *Handle) renew(ctx context.Context) (ok, admitted bool, err error) {
	if len(h.cfg.Hooks) == 0 {
		ok, err = h.extendChecked(ctx, 0, true)
		return ok, true, err
	}
	ctx, sc, err := h.cfg.Begin(ctx, "EXTEND")
	if err != nil {
		return false, false, err
	}
	ok, err = h.extendChecked(ctx, 0, true)
	sc.End(err)
	return ok, true, err
}

// nextRenewal returns how long until the handle's next renewal is due ([RenewalDue] for its current
// deadline and TTL); 0 for a hold without expiry.
func (h *Handle) nextRenewal() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nextRenewalLocked()
}

// nextRenewalLocked is nextRenewal; h.mu must be held.
func (h *Handle) nextRenewalLocked() time.Duration {
	if h.deadline.IsZero() || h.ttl == 0 {
		return 0
	}
	return RenewalDue(h.deadline, h.ttl, h.cfg.renewFraction())
}

// RenewalDue is the keep-alive schedule of every owner-token hold: how long from now until the next
// renewal of a hold whose local estimate ends at deadline, with ttl and renew fraction fraction, is
// due. With period = fraction × ttl (at least 1ms), it is due at deadline − max(ttl − period,
// period/2): one period after the send of the last confirmed renewal (deadline − ttl, up to the
// server clock's step), and at the latest half a period before the estimate ends, the margin for the
// renewal's round trip. It is 0 once that instant passed (a keep-alive started late renews at once).
func RenewalDue(deadline time.Time, ttl time.Duration, fraction float64) time.Duration {
	period := max(time.Duration(float64(ttl)*fraction), time.Millisecond)
	return max(time.Until(deadline.Add(-max(ttl-period, period/2))), 0)
}

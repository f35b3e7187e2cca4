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
// "KeepAlive ...". It returns at once: [luakit.ErrKeepAliveRunning] if a keep-alive already runs, the
// handle's cause ([Handle.Err]) if it already ended, else nil (also, starting nothing, on a hold
// without expiry). A confirmed [Handle.ExtendTTL] from any goroutine re-arms the schedule. Ending ctx
// stops renewing without releasing; Release stops it and waits for its goroutine, so no goroutine
// outlives a released handle. KeepAlive is not a hook operation; with Config.Hooks each renewal is
// admitted as its own "<NAME> EXTEND" with ctx, and a rejected one is handled like a failed one.
func (h *Handle) KeepAlive(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.vouchingLocked() {
		return h.cause
	}
	if h.keepAliveDone != nil {
		select {
		case <-h.keepAliveDone:
		default:
			return luakit.ErrKeepAliveRunning
		}
	}
	if h.ttl == 0 {
		return nil
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	rearm := make(chan struct{}, 1)
	h.keepAliveStop, h.keepAliveDone, h.rearm = stop, done, rearm
	ended := h.contextLocked().Done()
	go func() {
		defer stop() // release the derived context when renewing ends on its own (loss, expiry)
		h.keepAlive(kctx, ended, rearm, done)
	}()
	return nil
}

// stopKeepAlive stops a running keep-alive and waits for it to exit.
func (h *Handle) stopKeepAlive() {
	h.mu.Lock()
	stop, done := h.keepAliveStop, h.keepAliveDone
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
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
// deadline and TTL); 0 for a hold without expiry (the loop then stops).
func (h *Handle) nextRenewal() time.Duration {
	h.mu.Lock()
	ttl, dl := h.ttl, h.deadline
	h.mu.Unlock()
	if dl.IsZero() || ttl == 0 {
		return 0
	}
	return RenewalDue(dl, ttl, h.cfg.renewFraction())
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

func (h *Handle) keepAlive(ctx context.Context, ended, rearm <-chan struct{}, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(h.nextRenewal())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-rearm:
			// A confirmed renewal (ours or a concurrent ExtendTTL) moved the deadline or the TTL.
			t.Reset(h.nextRenewal())
			continue
		case <-t.C:
		}
		dl := h.Deadline()
		if dl.IsZero() {
			return // made non-expiring by ExtendTTL: nothing left to renew
		}
		rctx, cancel := context.WithDeadline(ctx, dl)
		ok, admitted, err := h.renew(rctx)
		cancel()
		switch {
		case err == nil && ok:
			t.Reset(h.nextRenewal())
		case err == nil:
			return // lost or expired: the handle has ended
		default:
			if ctx.Err() != nil {
				return
			}
			if admitted && luakit.IsTerminal(err) && !errors.Is(err, luakit.ErrUncertain) {
				// Refused by the server (NOPERM, WRONGTYPE...): no retry can succeed, so end the
				// handle with that error instead of retrying until the estimate elapses.
				h.mu.Lock()
				h.endLocked(err)
				h.mu.Unlock()
				return
			}
			if h.vouching() {
				h.cfg.logger().LogAttrs(context.Background(), slog.LevelWarn,
					"coordkit/"+h.cfg.name()+": renewal failed; retrying",
					slog.Bool("uncertain", errors.Is(err, luakit.ErrUncertain)), slog.String("error", err.Error()),
					slog.Duration("remaining", h.Remaining()))
			}
			period := max(time.Duration(float64(h.TTL())*h.cfg.renewFraction()), time.Millisecond)
			t.Reset(max(min(period/4, h.cfg.retryDelay()), time.Millisecond))
		}
	}
}

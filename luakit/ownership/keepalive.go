package ownership

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// KeepAlive starts renewing the hold in the background every RenewFraction × TTL (default TTL/3) until
// ctx ends, [Handle.Release] is called, or the handle ends. It returns at once:
// [luakit.ErrKeepAliveRunning] if a keep-alive already runs, the handle's cause ([Handle.Err]) if it
// already ended, else nil. On a hold without expiry there is nothing to renew: it returns nil and
// starts nothing.
//
// A renewal the server answers with "not held" ends the handle with [luakit.ErrLost]; one it rejects with
// a terminal error ([luakit.Classify]: NOPERM, WRONGTYPE...) ends it with that error at once (so
// errors.Is(h.Err(), luakit.ErrNoPermission) reports an ACL refusal). Any other failed or uncertain
// renewal is logged and retried after the retry delay while the local estimate lasts; if none is confirmed before
// it elapses the handle ends with [luakit.ErrExpired]. Each renewal is bounded by the current deadline.
// Watch [Handle.Done] or [Handle.Context] to stop protected work. Ending ctx stops renewing without
// releasing (the hold then expires after its TTL); Release stops it and waits for its goroutine, so no
// goroutine outlives a released handle.
//
// KeepAlive itself sends nothing and is not a hook operation (local housekeeping); with
// Config.Hooks each background renewal is admitted as its own "<NAME> EXTEND" with ctx. A rejected
// renewal is treated like a failed one: logged, the lease kept, retried after the retry delay.
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
	h.keepAliveStop, h.keepAliveDone = stop, done
	ended := h.contextLocked().Done()
	go func() {
		defer stop() // release the derived context when renewing ends on its own (loss, expiry)
		h.keepAlive(kctx, ended, done)
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

func (h *Handle) keepAlive(ctx context.Context, ended <-chan struct{}, done chan struct{}) {
	defer close(done)
	period := func() time.Duration {
		return max(time.Duration(float64(h.TTL())*h.cfg.renewFraction()), time.Millisecond)
	}
	interval := period()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			return
		case <-t.C:
		}
		dl := h.Deadline()
		if dl.IsZero() {
			return // made non-expiring by ExtendTTL: nothing left to renew
		}
		rctx, cancel := context.WithDeadline(ctx, dl)
		ok, err := h.Extend(rctx)
		cancel()
		switch {
		case err == nil && ok:
			interval = period()
			t.Reset(interval)
		case err == nil:
			return // lost or expired: the handle has ended
		default:
			if ctx.Err() != nil {
				return
			}
			if luakit.IsTerminal(err) && !errors.Is(err, luakit.ErrUncertain) {
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
			t.Reset(max(min(interval/4, h.cfg.retryDelay()), time.Millisecond))
		}
	}
}

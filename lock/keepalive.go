package lock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// KeepAlive starts renewing the lease in the background every renew fraction × TTL (see
// [WithRenewFraction]; default TTL/3) until ctx ends, [Lease.Release] is called, or ownership is lost or
// uncertain. It returns at once: [ErrKeepAliveRunning] if a keep-alive already runs, [ErrReleased],
// [ErrLost] or [ErrExpired] if the handle already ended, else nil.
//
// A renewal the server refuses ends the handle with [ErrLost]. A failed or uncertain renewal is retried
// (after a short delay) while the local estimate lasts; if no renewal is confirmed before it elapses the
// handle ends with [ErrExpired]. Watch [Lease.Done] or [Lease.Context] to stop protected work. Ending
// ctx stops renewing without releasing (the lease then expires after its TTL); Release stops it too and
// waits for the renewing goroutine to exit, so no goroutine outlives the handle.
func (h *Lease) KeepAlive(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return context.Cause(h.ctx)
	}
	if h.keepAliveDone != nil {
		select {
		case <-h.keepAliveDone:
		default:
			return ErrKeepAliveRunning
		}
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	h.keepAliveStop, h.keepAliveDone = stop, done
	go func() {
		defer stop() // release the derived context when renewing ends on its own (loss, expiry)
		h.keepAlive(kctx, done)
	}()
	return nil
}

// stopKeepAlive stops a running keep-alive and waits for it to exit.
func (h *Lease) stopKeepAlive() {
	h.mu.Lock()
	stop, done := h.keepAliveStop, h.keepAliveDone
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (h *Lease) keepAlive(ctx context.Context, done chan struct{}) {
	defer close(done)
	interval := time.Duration(float64(h.ttl) * h.l.cfg.renewFraction)
	interval = max(interval, time.Millisecond)
	retry := max(min(interval/4, h.l.cfg.retryDelay), time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(ctx, h.Deadline())
		ok, err := h.Extend(rctx)
		cancel()
		switch {
		case err == nil && ok:
			t.Reset(interval)
		case err == nil && !ok:
			return // lost or expired: the handle has ended
		default:
			if ctx.Err() != nil {
				return
			}
			if h.ctx.Err() == nil {
				h.l.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "coordkit/lock: lease renewal failed; retrying",
					slog.Bool("uncertain", errors.Is(err, ErrUncertain)), slog.String("error", err.Error()),
					slog.Duration("remaining", h.Remaining()))
			}
			t.Reset(retry)
		}
	}
}

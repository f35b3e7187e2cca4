package ownership

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// TryResult is what one try of a waiting acquisition reports to [Waiter.Wait].
type TryResult struct {
	// Busy: the resource is held by others; wait for a change of the key or for HolderTTL.
	Busy bool
	// HolderTTL is, when Busy, how long until the holders' hold ends if nobody renews it (the earliest
	// moment a new attempt can succeed); negative when it has no expiry or is unknown.
	HolderTTL time.Duration
	// Retry: a transient failure (a server "not now" reply, a late grant, an uncertain attempt whose
	// cleanup was answered); try again after the retry delay.
	Retry bool
	// Err ends the wait when neither Busy nor Retry is set: nil means acquired. [Config.Try] sets it in
	// every case ([luakit.ErrNotAcquired] when Busy), so a try-acquisition returns it as it is.
	Err error
	// Tracked, when Busy, says the attempt itself made the server track the key for this client: its
	// script read the key right after CLIENT CACHING YES ([SendTracked]). A Waiter without
	// KeyPersists then sleeps at once, without an arming read, until an invalidation or HolderTTL (a
	// holder without expiry: re-checked after luakit.ArmCacheTTL).
	Tracked bool
}

// Waiter is the waiting loop shared by every blocking acquisition: try, and while the resource is
// busy sleep until the key is invalidated (RESP3 client-side caching through a [luakit.Tracker]) or
// the holders' TTL passes, then try again. It never polls on a fixed period, except for a holder
// without expiry on a client without tracking (every UntrackedWait). A Waiter is shared by the
// waiting calls of one primitive instance and is safe for concurrent use; the zero value is not usable,
// fill the fields before the first Wait.
type Waiter struct {
	// Client is the primitive's client; its tracker (see [luakit.TrackerOf]) is used unless Tracker is
	// set.
	Client rueidis.Client
	// Tracker, when set, is the tracker wired into Client's invalidations.
	Tracker *luakit.Tracker
	// Config gives the retry delay, the name and the logger.
	Config *Config
	// UntrackedWait is the re-check period for a holder without expiry when no invalidation can
	// arrive. Default 1s.
	UntrackedWait time.Duration
	// KeyPersists is set by primitives whose key can survive a release (a semaphore's sorted set, a
	// hash of named leases, a read-write lock with other readers): the Waiter then arms tracking before
	// each attempt, so a release between an attempt and the arming read is not slept through. When
	// false (a lock, whose release deletes its key) it arms after a busy attempt and retries at once
	// only when the key is gone, one round trip fewer per hand-off.
	KeyPersists bool

	warnOnce sync.Once
}

// Tracking reports whether waiting can wake on invalidations: the Waiter has a tracker (its own or the
// client's). An attempt may then be sent with [SendTracked].
func (w *Waiter) Tracking() bool { return w.tracker() != nil }

func (w *Waiter) tracker() *luakit.Tracker {
	if w.Tracker != nil {
		return w.Tracker
	}
	return luakit.TrackerOf(w.Client)
}

// warn logs, once per Waiter, that waiting cannot wake on invalidations.
func (w *Waiter) warn(why string) {
	w.warnOnce.Do(func() {
		w.Config.logger().LogAttrs(context.Background(), slog.LevelWarn,
			"coordkit/"+w.Config.name()+": waiting without invalidations: a waiter wakes only when the holder's TTL passes, "+
				"not when it releases; build the client with luakit.NewTrackedClient (RESP3, client-side caching on) "+
				"or pass its tracker with the module's WithTracker option",
			slog.String("reason", why))
	})
}

// Wait calls attempt until it reports acquisition or a final error, sleeping while the resource at key
// (a physical key whose writes mean "try again") is busy. It registers interest in key before each
// attempt, so no invalidation after the attempt is missed, and arms tracking with a cached PTTL read
// ([luakit.ArmTracked]). Without KeyPersists it arms after each busy attempt (one round trip per wait)
// and retries at once when the key is gone, unless the attempt was Tracked (its own read armed it). With KeyPersists it arms after the first busy attempt and
// tries once more at once, so a change made between that attempt and the arming read is not slept
// through; from then on an arming read precedes each attempt, served from rueidis' local cache while
// the server tracks the key.
//
// It returns nil once attempt reported acquisition, attempt's final error, or an error wrapping
// ctx.Err() when ctx ends while waiting (name: "wait").
func (w *Waiter) Wait(ctx context.Context, key string, attempt func(context.Context) TryResult) error {
	tr := w.tracker()
	untracked := w.UntrackedWait
	if untracked <= 0 {
		untracked = time.Second
	}
	// armed (KeyPersists only): tracking was armed once; from then on each attempt is preceded by an
	// arming read, and a change after it always produces an invalidation.
	armed, justArmed := false, false
	var arm armResult
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: acquire: %w", w.Config.name(), err)
		}
		var watch *luakit.Watch
		if tr != nil {
			watch = tr.Watch(key) // before any read, so that no invalidation after it is missed
		}
		if watch != nil && armed && !justArmed {
			if arm = w.arm(ctx, key); arm.ctxErr != nil {
				watch.Stop()
				return arm.ctxErr
			}
		}
		justArmed = false
		a := attempt(ctx)
		var wait time.Duration
		switch {
		case a.Busy && watch != nil && !w.KeyPersists && a.Tracked:
			// The attempt's own read armed tracking: the Watch, registered before it, catches the
			// next change.
			wait = a.HolderTTL
			if wait < 0 {
				wait = luakit.ArmCacheTTL
			}
		case a.Busy && watch != nil && !w.KeyPersists:
			// Arm after the attempt: a release deletes the key, so a release between the two shows
			// as a missing key, and then we retry at once.
			if arm = w.arm(ctx, key); arm.ctxErr != nil {
				watch.Stop()
				return arm.ctxErr
			}
			wait = a.HolderTTL
			switch {
			case arm.err != nil:
			case !arm.exists:
				watch.Stop()
				continue
			default:
				if !arm.tracked {
					w.warn("client-side caching is off or the connection speaks RESP2")
				}
				if arm.pttl >= 0 && (wait < 0 || arm.pttl < wait) {
					wait = arm.pttl
				}
			}
		case a.Busy && watch != nil && !armed:
			// First busy attempt: arm tracking now, then try once more at once, so that a change
			// between the attempt and the arming read (a release that leaves the key in place) is
			// not missed.
			watch.Stop()
			if arm = w.arm(ctx, key); arm.ctxErr != nil {
				return arm.ctxErr
			}
			if arm.err == nil {
				armed, justArmed = true, true
				continue
			}
			wait = a.HolderTTL // tracking unavailable for now
			watch = nil
		case a.Busy:
			wait = a.HolderTTL
			switch {
			case watch == nil:
				w.warn("no tracker on the client")
			case arm.err != nil:
				// Tracking unavailable for now: fall back to the holders' TTL.
			case arm.exists && !arm.tracked:
				w.warn("client-side caching is off or the connection speaks RESP2")
				fallthrough
			case arm.exists:
				if arm.pttl >= 0 && (wait < 0 || arm.pttl < wait) {
					wait = arm.pttl
				}
			}
		case a.Retry:
			wait = w.Config.retryDelay()
		default:
			if watch != nil {
				watch.Stop()
			}
			return a.Err
		}
		if a.Busy {
			if wait < 0 {
				wait = untracked
			} else {
				// The hold is logically over once its TTL passed (whole milliseconds on the server).
				wait += time.Millisecond
			}
		}
		if err := luakit.Sleep(ctx, watch, wait); err != nil {
			return fmt.Errorf("%s: acquire: %w", w.Config.name(), err)
		}
	}
}

type armResult struct {
	exists, tracked bool
	pttl            time.Duration
	err, ctxErr     error
}

// arm makes the server track key for this connection (see luakit.ArmTracked). ctxErr is set when ctx
// ended during the read.
func (w *Waiter) arm(ctx context.Context, key string) armResult {
	exists, pttl, tracked, err := luakit.ArmTracked(ctx, w.Client, key)
	r := armResult{exists: exists, tracked: tracked, pttl: pttl, err: err}
	if err != nil && ctx.Err() != nil {
		r.ctxErr = fmt.Errorf("%s: acquire: %w", w.Config.name(), ctx.Err())
	}
	return r
}

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

// Attempt is what one try of a waiting acquisition reports to [Waiter.Wait].
type Attempt struct {
	// Busy: the resource is held by others; wait for a change of the key or for HolderTTL.
	Busy bool
	// HolderTTL is, when Busy, how long until the holders' hold ends if nobody renews it (the earliest
	// moment a new attempt can succeed); negative when it has no expiry or is unknown.
	HolderTTL time.Duration
	// Retry: a transient failure (a server "not now" reply, a late grant, an uncertain attempt whose
	// cleanup was answered); try again after the retry delay.
	Retry bool
	// Err ends the wait when neither Busy nor Retry is set: nil means acquired.
	Err error
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

	warnOnce sync.Once
}

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
// (one round trip per wait) when busy.
//
// It returns nil once attempt reported acquisition, attempt's final error, or an error wrapping
// ctx.Err() when ctx ends while waiting (name: "wait").
func (w *Waiter) Wait(ctx context.Context, key string, attempt func(context.Context) Attempt) error {
	tr := w.tracker()
	untracked := w.UntrackedWait
	if untracked <= 0 {
		untracked = time.Second
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: acquire: %w", w.Config.name(), err)
		}
		var watch *luakit.Watch
		if tr != nil {
			watch = tr.Watch(key)
		}
		a := attempt(ctx)
		var wait time.Duration
		switch {
		case a.Busy:
			wait = a.HolderTTL
			if watch == nil {
				w.warn("no tracker on the client")
			} else {
				// Arm tracking on this connection. If the key vanished since the attempt, retry now; if
				// it changed, its PTTL may be the better deadline.
				exists, apttl, tracked, err := luakit.ArmTracked(ctx, w.Client, key)
				switch {
				case err != nil && ctx.Err() != nil:
					watch.Stop()
					return fmt.Errorf("%s: acquire: %w", w.Config.name(), ctx.Err())
				case err != nil:
					// Tracking unavailable for now: fall back to the holders' TTL.
				case !exists:
					wait = 0
				default:
					if !tracked {
						w.warn("client-side caching is off or the connection speaks RESP2")
					}
					if apttl >= 0 && (wait < 0 || apttl < wait) {
						wait = apttl
					}
				}
			}
			if wait < 0 {
				wait = untracked
			} else if wait > 0 || watch == nil {
				// The hold is logically over once its TTL passed (whole milliseconds on the server).
				wait += time.Millisecond
			}
		case a.Retry:
			wait = w.Config.retryDelay()
		default:
			if watch != nil {
				watch.Stop()
			}
			return a.Err
		}
		if wait == 0 {
			if watch != nil {
				watch.Stop()
			}
			continue
		}
		if err := luakit.Sleep(ctx, watch, wait); err != nil {
			return fmt.Errorf("%s: acquire: %w", w.Config.name(), err)
		}
	}
}

package luakit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// ArmCacheTTL caps how long [Arm] keeps a key's PTTL in rueidis' local
// cache, and so the longest pttl Arm reports for a key whose expiry is
// further away: a waiter re-arms at least this often.
const ArmCacheTTL = time.Minute

// Tracker turns RESP3 client-side-caching invalidations into wake-ups, so
// that a waiter sleeps until a key changes instead of polling.
//
// Wire it into the client with [NewTrackedClient] or by setting
// rueidis.ClientOption.OnInvalidations to t.Hook(previous). Then a waiter
// calls [Tracker.Watch] for the key, then [Arm] (which makes the server
// track the key for this connection), then tries its operation, and sleeps
// on the Watch's channel and on the pttl deadline Arm returned. Every
// wake-up means "try again", never "acquired": an invalidation can be
// caused by an unrelated write or arrive for an earlier read.
//
// A Tracker is safe for concurrent use. Create it with NewTracker; the zero
// value is not usable.
type Tracker struct {
	mu      sync.RWMutex
	watches map[string]map[*Watch]struct{}
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{watches: make(map[string]map[*Watch]struct{})}
}

// OnInvalidations wakes the watches of every key named in msgs. A nil msgs
// (rueidis sends it when the server flushes or the connection is lost or
// reset, after which tracking state is unknown) wakes every watch. It never
// blocks: each Watch holds at most one pending wake-up and extra ones are
// dropped. Its signature matches rueidis.ClientOption.OnInvalidations.
func (t *Tracker) OnInvalidations(msgs []rueidis.RedisMessage) {
	if msgs == nil {
		t.wakeAll()
		return
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.watches) == 0 {
		return
	}
	for i := range msgs {
		key, err := msgs[i].ToString()
		if err != nil {
			continue
		}
		t.wakeLocked(key)
	}
}

// invalidate wakes the watches of keys; the string form of OnInvalidations.
func (t *Tracker) invalidate(keys []string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, k := range keys {
		t.wakeLocked(k)
	}
}

func (t *Tracker) wakeLocked(key string) {
	for w := range t.watches[key] {
		w.notify()
	}
}

func (t *Tracker) wakeAll() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, set := range t.watches {
		for w := range set {
			w.notify()
		}
	}
}

// Hook returns a callback for rueidis.ClientOption.OnInvalidations that
// calls t.OnInvalidations(msgs) and then next(msgs) when next is non-nil,
// so a Tracker can be added to a client that already has a callback.
func (t *Tracker) Hook(next func([]rueidis.RedisMessage)) func([]rueidis.RedisMessage) {
	return func(msgs []rueidis.RedisMessage) {
		t.OnInvalidations(msgs)
		if next != nil {
			next(msgs)
		}
	}
}

// Watch registers interest in key and returns a Watch whose channel
// receives on each invalidation of key (or flush). Register BEFORE arming
// and reading the key, so that an invalidation arriving in between is not
// missed. The caller must call Stop when done. Safe for concurrent use.
func (t *Tracker) Watch(key string) *Watch {
	w := &Watch{t: t, key: key, ch: make(chan struct{}, 1)}
	t.mu.Lock()
	set := t.watches[key]
	if set == nil {
		set = make(map[*Watch]struct{})
		t.watches[key] = set
	}
	set[w] = struct{}{}
	t.mu.Unlock()
	return w
}

// keys returns the number of watched keys (for tests).
func (t *Tracker) keys() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.watches)
}

// Watch is one registration of interest in a key, created by
// [Tracker.Watch]. Its methods are safe for concurrent use.
type Watch struct {
	t   *Tracker
	key string
	ch  chan struct{}

	stopOnce sync.Once
}

func (w *Watch) notify() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// C returns the channel that receives a value on each invalidation of the
// key or flush. It is buffered with capacity 1 and sends never block, so
// several invalidations before a receive coalesce into one. It is never
// closed; after Stop it receives nothing new (a value already buffered may
// remain).
func (w *Watch) C() <-chan struct{} { return w.ch }

// Stop removes the Watch from its Tracker, deleting the key's entry when it
// was the key's last Watch. It is idempotent and never blocks for long.
func (w *Watch) Stop() {
	w.stopOnce.Do(func() {
		t := w.t
		t.mu.Lock()
		if set := t.watches[w.key]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(t.watches, w.key)
			}
		}
		t.mu.Unlock()
	})
}

// NewTrackedClient sets opt.OnInvalidations to t.Hook(opt.OnInvalidations)
// (keeping any callback already set) and returns rueidis.NewClient(opt),
// which dials the server, wrapped by [GuardClose] (after Close every command
// fails with rueidis.ErrClosing). The caller owns and must Close the client.
// Invalidations arrive only with RESP3 and client-side caching enabled
// (opt.DisableCache false, the rueidis default). It returns an error if t
// is nil or NewClient fails.
func NewTrackedClient(opt rueidis.ClientOption, t *Tracker) (rueidis.Client, error) {
	if t == nil {
		return nil, errors.New("luakit: NewTrackedClient: nil Tracker")
	}
	opt.OnInvalidations = t.Hook(opt.OnInvalidations)
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	g := GuardClose(c).(*closeGuard)
	g.tracker = t
	return g, nil
}

// TrackerOf returns the [Tracker] wired into c by [NewTrackedClient], or nil for any other client.
// Primitives call it so that waiting on a client built by NewTrackedClient wakes on invalidations with
// no extra option. It does no I/O.
func TrackerOf(c rueidis.Client) *Tracker {
	if g, ok := c.(*closeGuard); ok {
		return g.tracker
	}
	return nil
}

// Arm reads key's PTTL with a client-side-cached read (DoCache, cached for at most ArmCacheTTL),
// which makes the server track key for this connection, so its next change or expiry produces an
// invalidation that a [Tracker] turns into a wake-up. It blocks for at most one round trip (none when
// served from the local cache). Errors are those of the PTTL command (see [Classify]).
//
// exists is false when the key does not exist (PTTL -2). Otherwise pttl is how long the caller may
// wait before re-checking. When the read is tracked it is the cached entry's remaining life (capped by
// the key's PTTL at read time and by ArmCacheTTL, also for a key without expiry): positive, at most
// ArmCacheTTL. Untracked (RESP2 or DisableCache: a plain PTTL) it is the PTTL the server reported, -1
// for a key without expiry: the caller then picks its own re-check interval.
//
// Callers must always also wait on the pttl deadline, then Arm again: an untracked read brings no
// invalidation, and an expiry's invalidation arrives only when the server's expiry cycle reaches the
// key (up to ~100 ms late).
func Arm(ctx context.Context, c rueidis.Client, key string) (exists bool, pttl time.Duration, err error) {
	exists, pttl, _, err = ArmTracked(ctx, c, key)
	return exists, pttl, err
}

// ArmTracked is [Arm] that also reports whether the read is tracked: tracked is true when the reply
// came with a client-side-cache lifetime, so the server will push an invalidation when key changes.
// It is false on a RESP2 client, a client with DisableCache, and for a missing key (nothing to
// track). A waiter that finds tracked false for a key that exists wakes only at the pttl deadline.
func ArmTracked(ctx context.Context, c rueidis.Client, key string) (exists bool, pttl time.Duration, tracked bool, err error) {
	// Pinned (never returned to rueidis's command pool): a waiter arms while a server may be
	// restarting, and rueidis recycles a retried read after its later attempt is answered while the
	// broken connection's writer may still be reading it (a data race). One small allocation per arm.
	resp := c.DoCache(ctx, c.B().Pttl().Key(key).Cache().Pin(), ArmCacheTTL)
	v, err := resp.AsInt64()
	if err != nil {
		return false, 0, false, err
	}
	cachePTTL := resp.CachePTTL()
	exists, pttl = armResult(v, cachePTTL)
	return exists, pttl, exists && cachePTTL > 0, nil
}

func armResult(v, cachePTTL int64) (bool, time.Duration) {
	switch {
	case v == -2:
		return false, 0
	case cachePTTL > 0:
		// Tracked: re-check when the cache entry ends, even for a key without expiry (v == -1).
		return true, time.Duration(cachePTTL) * time.Millisecond
	case v < 0:
		return true, -1 // no expiry, and the read is not tracked
	}
	return true, time.Duration(v) * time.Millisecond
}

// Sleep blocks until w receives an invalidation (w may be nil: no tracking), d elapses (d <= 0 means
// no deadline: only w or ctx can end the wait), or ctx ends; it then stops w. It returns nil on a
// wake-up or deadline (meaning "try again", never "acquired") and ctx.Err() when ctx ended. It sends no
// commands and starts no goroutine.
func Sleep(ctx context.Context, w *Watch, d time.Duration) error {
	var wake <-chan struct{}
	if w != nil {
		defer w.Stop()
		wake = w.C()
	}
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-wake:
	case <-deadline:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

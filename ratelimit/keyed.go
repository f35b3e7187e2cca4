package ratelimit

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit/internal/stopwait"
)

// Keyed applies one policy to many keys (per tenant, per IP, per route) without a Go object per key:
// each key is its own limit in the server (after the [WithKeyPrefix] prefix), and every key shares
// one validated policy. [Keyed.AllowN] needs no local state, nor does [Keyed.WaitN] without
// [WithQueue]; keys used with WaitN and a queue get local state (a queue and [Keyed.KeyStats]) on
// demand, dropped once idle for [WithIdleTimeout] (never while requests wait) and bounded by
// [WithMaxKeys]. Dropping it loses nothing shared: the usage lives in the server.
//
// Each key records the signature and policy version of the settings that wrote it, and is converted
// to the Keyed's settings by its first decision after a change ([Keyed.SetPolicy]), so a Keyed never
// returns [ErrConfigMismatch]. A Keyed is safe for concurrent use. Close it when done: it ends the
// idle-key sweep and the keys' queue goroutines. It never closes the client.
type Keyed struct {
	client      rueidis.Client
	settings    atomic.Pointer[keyedSettings] // read lock-free on the decision path
	closedFlag  atomic.Bool                   // mirrors closed, read lock-free
	cfg         config
	m           *metrics
	identityFor func(string) string // nil without WithKeyedDenyList

	stopCtx context.Context // cancelled by Close: ends the janitor and stateless waits
	stopFn  context.CancelFunc
	wg      sync.WaitGroup

	// lookup mirrors entries (written under mu) for AllowN's lock-free read.
	lookup sync.Map // string → *keyEntry

	// base is the policy given to NewKeyed, compiled: state stored without a signature (by a
	// Limiter) is taken to hold it.
	base    *compiled
	version int64      // of the published settings; written under updMu
	updMu   sync.Mutex // serializes SetPolicy

	mu      sync.Mutex
	closed  bool
	entries map[string]*keyEntry
	idle    list.List // *keyEntry without calls in progress, least recently used first
}

// keyedSettings is one published policy of a Keyed.
type keyedSettings struct {
	c *compiled
	p Policy
}

// current returns the settings in force now.
func (k *Keyed) current() (*compiled, Policy) {
	s := k.settings.Load()
	return s.c, s.p
}

func (k *Keyed) isClosed() bool { return k.closedFlag.Load() }

// keyEntry is one key's local state.
type keyEntry struct {
	key  string
	lim  *Limiter
	refs int           // calls in progress (including waiting ones)
	last time.Time     // when refs last dropped to 0
	elem *list.Element // in Keyed.idle while refs == 0
}

// NewKeyed returns a Keyed limiter applying policy to every key. It does no I/O and starts one
// background goroutine (stopped by Close).
//
// Options: [WithKeyPrefix], [WithQueue] (a queue per key, for WaitN), [WithMeterProvider],
// [WithKeyedDenyList], [WithMaxKeys], [WithIdleTimeout]. It returns an error wrapping [ErrNilClient]
// for a nil client; every other error matches [ErrInvalidConfig]: one wrapping [ErrInvalidPolicy], or
// the error of an invalid option.
func NewKeyed(client rueidis.Client, policy Policy, opts ...KeyedOption) (*Keyed, error) {
	if client == nil {
		return nil, errNilClient
	}
	c, err := compile(clonePolicy(policy))
	if err != nil {
		return nil, err
	}
	policy = c.src // durations rounded up to whole µs: what is enforced
	cfg, err := applyKeyedOptions(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.provider(), cfg.instance)
	if err != nil {
		return nil, err
	}
	k := &Keyed{
		client:  client,
		cfg:     cfg,
		m:       m,
		entries: make(map[string]*keyEntry),
	}
	k.stopCtx, k.stopFn = context.WithCancel(context.Background())
	k.base, k.version = c, cfg.policyVersion
	k.settings.Store(&keyedSettings{c: c.keyedFor(cfg.policyVersion, nil), p: policy})
	if cfg.deny != nil {
		k.identityFor = cfg.identityFor
	}
	k.wg.Add(1)
	go k.janitor()
	return k, nil
}

// Allow is AllowN(ctx, key, 1).
func (k *Keyed) Allow(ctx context.Context, key string) (Result, error) { return k.AllowN(ctx, key, 1) }

// AllowN decides n permits for key now, in one round trip, without waiting; see [Limiter.AllowN].
// key is binary-safe and must not be empty. With [WithKeyedDenyList] the key's identity is checked
// first; an empty identity is [ErrEmptyIdentity]. The outcome counts in the key's [Stats] only when
// the key has local state. Errors are those of [Limiter.AllowN], plus one wrapping
// luakit.ErrEmptyKey (and matching [ErrInvalidConfig]) for an empty key.
func (k *Keyed) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	ctx, sc, err := k.cfg.hooks.Begin(ctx, op(opAcquire, k.cfg.instance))
	if err != nil {
		return Result{}, err
	}
	res, err := k.allowN(ctx, key, n)
	endDecision(&sc, err)
	return res, err
}

func (k *Keyed) allowN(ctx context.Context, key string, n int64) (Result, error) {
	if n < 0 {
		return Result{}, ErrNegativePermits
	}
	if key == "" {
		return Result{}, errEmptyKey
	}
	// Lock-free: the closed flag, a sync.Map lookup and (with no Update in progress) one
	// compare-and-swap in the key's Limiter.
	if k.isClosed() {
		return Result{}, errClosed
	}
	if v, ok := k.lookup.Load(key); ok {
		// No reference is taken: an idle entry dropped meanwhile has a closed Limiter, which
		// refuses before sending anything, and the key is then decided without local state.
		res, err := v.(*keyEntry).lim.allowN(ctx, n)
		if err == nil || !errors.Is(err, ErrClosed) || k.isClosed() {
			return res, err
		}
	}
	res, err := k.decideStateless(ctx, key, n)
	if err == nil {
		k.m.record(nil, res)
	}
	return res, err
}

// decideStateless decides for a key without local state, counting nothing.
func (k *Keyed) decideStateless(ctx context.Context, key string, n int64) (Result, error) {
	if k.identityFor != nil {
		id := k.identityFor(key)
		if id == "" {
			return Result{}, ErrEmptyIdentity
		}
		denied, err := k.cfg.deny(ctx, id)
		if err != nil {
			return Result{}, err
		}
		if denied {
			return Result{Reason: ReasonDenyList, Limit: k.settings.Load().c.capacity()}, nil
		}
	}
	d, err := k.settings.Load().c.decide(ctx, k.client, k.cfg.keys.Key(key), n)
	if err != nil {
		return Result{}, err
	}
	return resultOf(d), nil
}

// waitStateless is WaitN for a key without local state: the wait loop of [Limiter.WaitN] without a
// queue.
func (k *Keyed) waitStateless(ctx context.Context, key string, n int64) (Result, error) {
	res, err := waitLoop(ctx, k.stopCtx, func() error { return errClosed },
		func() (Result, error) { return k.decideStateless(ctx, key, n) })
	if err != nil {
		return res, err
	}
	if !res.Allowed {
		err = notAdmitted(res, n, k.settings.Load().c.capacity(), false)
	}
	k.m.record(nil, res)
	return res, err
}

// Wait is WaitN(ctx, key, 1).
func (k *Keyed) Wait(ctx context.Context, key string) (Result, error) { return k.WaitN(ctx, key, 1) }

// WaitN waits until n permits for key are admitted, ctx ends, or the request can never be admitted;
// see [Limiter.WaitN] (a WaitN that returns without admission always returns an error). Without
// [WithQueue] it needs no local state: it sleeps each rejection's RetryAfter and decides again. With
// a queue, the key's local state is created on demand; when [WithMaxKeys] keys already have state
// and none of them is idle, the request waits like a Keyed without a queue.
//
// A key stored with a higher policy version is decided by its stored settings (see [Keyed.SetPolicy]):
// when their capacity (the rejection's Limit) is below n, WaitN returns [ErrExceedsCapacity] on that
// first rejection, without sleeping or retrying and with nothing consumed, queue or not; n above the
// Keyed's own capacity is ErrExceedsCapacity before any I/O. [ErrQueueFull] is returned only with a
// queue, for the queue's own rejections.
func (k *Keyed) WaitN(ctx context.Context, key string, n int64) (Result, error) {
	ctx, sc, err := k.cfg.hooks.Begin(ctx, op(opAcquire, k.cfg.instance))
	if err != nil {
		return Result{}, err
	}
	res, err := k.waitN(ctx, key, n)
	endDecision(&sc, err)
	return res, err
}

func (k *Keyed) waitN(ctx context.Context, key string, n int64) (Result, error) {
	if n < 0 {
		return Result{}, ErrNegativePermits
	}
	if key == "" {
		return Result{}, errEmptyKey
	}
	if k.cfg.queueLimit == 0 {
		if k.isClosed() {
			return Result{}, errClosed
		}
		return k.waitStateless(ctx, key, n)
	}
	e, err := k.acquire(key, true)
	if err != nil {
		return Result{}, err
	}
	if e == nil {
		return k.waitStateless(ctx, key, n)
	}
	defer k.release(e)
	return e.lim.waitN(ctx, n)
}

// acquire returns key's entry with one more reference, creating it when create is set and there is
// room (evicting the least recently used idle entry when full); nil when there is none.
func (k *Keyed) acquire(key string, create bool) (*keyEntry, error) {
	// The identity function is the caller's code: it runs before the lock is taken (it may call the
	// Keyed), for every call that may create state.
	identity := ""
	if create && k.identityFor != nil {
		identity = k.identityFor(key)
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, errClosed
	}
	if e := k.entries[key]; e != nil {
		if e.refs == 0 {
			k.idle.Remove(e.elem)
			e.elem = nil
		}
		e.refs++
		k.mu.Unlock()
		return e, nil
	}
	if !create {
		k.mu.Unlock()
		return nil, nil
	}
	if k.identityFor != nil && identity == "" {
		k.mu.Unlock() // before evicting anything
		return nil, ErrEmptyIdentity
	}
	var evicted *Limiter
	if len(k.entries) >= k.cfg.maxKeys {
		front := k.idle.Front()
		if front == nil {
			k.mu.Unlock()
			return nil, nil
		}
		old := front.Value.(*keyEntry)
		k.dropLocked(old)
		evicted = old.lim
	}
	var deny denyFunc
	if k.identityFor != nil {
		deny = k.cfg.deny
	}
	cur, pol := k.current()
	e := &keyEntry{
		key:  key,
		lim:  newLimiter(k.client, key, cur, pol, k.cfg, k.m, deny, identity),
		refs: 1,
	}
	k.entries[key] = e
	k.lookup.Store(key, e)
	k.mu.Unlock()
	closeIdle(evicted)
	return e, nil
}

// closeIdle closes a dropped entry's limiter. It has no waiters, so its queue goroutine (if any) is
// already ending and Close returns at once.
func closeIdle(l *Limiter) {
	if l != nil {
		_ = l.Close(context.Background())
	}
}

// release drops the reference acquire returned.
func (k *Keyed) release(e *keyEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e.refs--
	if e.refs == 0 && k.entries[e.key] == e {
		e.last = time.Now()
		e.elem = k.idle.PushBack(e)
	}
}

func (k *Keyed) dropLocked(e *keyEntry) {
	if e.elem != nil {
		k.idle.Remove(e.elem)
		e.elem = nil
	}
	delete(k.entries, e.key)
	k.lookup.CompareAndDelete(e.key, e)
}

// janitor drops the state of keys idle for the idle timeout.
func (k *Keyed) janitor() {
	defer k.wg.Done()
	every := k.cfg.idleTimeout / 2
	every = max(every, 10*time.Millisecond)
	every = min(every, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-k.stopCtx.Done():
			return
		case <-t.C:
		}
		var dropped []*Limiter
		k.mu.Lock()
		cutoff := time.Now().Add(-k.cfg.idleTimeout)
		for {
			front := k.idle.Front()
			if front == nil {
				break
			}
			e := front.Value.(*keyEntry)
			if e.last.After(cutoff) {
				break
			}
			k.dropLocked(e)
			dropped = append(dropped, e.lim)
		}
		k.mu.Unlock()
		for _, l := range dropped {
			closeIdle(l)
		}
	}
}

// Policy returns the policy in force (given to NewKeyed or the last SetPolicy), durations rounded up to
// whole microseconds and a sliding window's Segments 0 reported as [DefaultSegments], as a copy made
// of plain values (see [Limiter.Policy]).
func (k *Keyed) Policy() Policy { _, p := k.current(); return clonePolicy(p) }

// KeyStats returns the statistics of key's local state: zero counts with Available -1 when it has
// none (never used with WaitN, or dropped when idle). It does no I/O.
func (k *Keyed) KeyStats(key string) Stats {
	k.mu.Lock()
	e := k.entries[key]
	k.mu.Unlock()
	if e == nil {
		return Stats{Available: -1}
	}
	return e.lim.Stats()
}

// KeyCount returns how many keys have local state now (at most [WithMaxKeys]). It does no I/O.
func (k *Keyed) KeyCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

// Close fails every request waiting in a key's queue with [ErrClosed], drops all local state, makes
// later calls return ErrClosed, and stops the background goroutines: it tells them to stop and waits
// for them until ctx ends; then it returns an error wrapping ctx.Err() (the goroutines, already told
// to stop, end on their own). Otherwise it returns nil. Calls deciding at that moment finish
// normally. It never closes the client. Close is idempotent: a later call waits again and returns
// nil once they have ended. Safe for concurrent use.
func (k *Keyed) Close(ctx context.Context) error {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		k.closedFlag.Store(true)
		k.stopFn()
		// Each key's limiter is closed now (failing its waiters) and its queue goroutine counted
		// in k.wg, so this Close and every later one wait for all of them.
		for _, e := range k.entries {
			e.lim.shutdown(errClosed)
			k.wg.Add(1)
			go func(l *Limiter) {
				defer k.wg.Done()
				l.pumpWG.Wait()
			}(e.lim)
		}
		clear(k.entries)
		k.lookup.Clear()
		k.idle.Init()
	}
	k.mu.Unlock()
	return stopwait.Wait(ctx, &k.wg)
}

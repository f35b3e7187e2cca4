package ratelimit

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed denylist*.lua
var denyScriptFS embed.FS

var (
	denyReadScript  = luakit.MustLoad(denyScriptFS, "denylist_read")
	denyWriteScript = luakit.MustLoad(denyScriptFS, "denylist_write")
)

// Defaults and bounds of the deny-list options.
const (
	// DefaultCacheDuration is how long a [DenyList] caches a membership unless [WithCacheDuration]
	// says otherwise.
	DefaultCacheDuration = time.Second
	// MaxCacheDuration is the longest cache duration [WithCacheDuration] accepts.
	MaxCacheDuration = time.Minute
	// DefaultCacheCapacity is how many identities a [DenyList] caches unless [WithCacheCapacity]
	// says otherwise.
	DefaultCacheCapacity = 1024
	// DefaultDenyListReadTimeout bounds a shared membership read unless [WithDenyListReadTimeout]
	// says otherwise.
	DefaultDenyListReadTimeout = 5 * time.Second
)

// DenyList is a set of denied identities stored in one server set, read through a bounded local cache.
// Bind it to limiters with [WithDenyList] or [WithKeyedDenyList]: a denied identity is rejected with
// [ReasonDenyList] before any capacity is touched. Share one DenyList per process (and per set): each
// instance has its own cache, so one instance per identity multiplies the cache bound and defeats read
// sharing.
//
// # Storage
//
// The set at the key (after the [WithDenyListKeyPrefix] prefix; binary-safe) holds the denied
// identities as members, compared byte for byte (exact and case-sensitive; UTF-8 text in practice, but
// any non-empty bytes work). Identities are application-controlled: their length is not bounded here,
// and cached ones are held in memory. [DenyList.SetDenied] runs
// SADD or SREM in a Lua script, reads run SISMEMBER in a Lua script: scripting and these set commands
// must be permitted. No expiry is set; membership persists until removed. The key is read on its own,
// so it may live in another Cluster slot than the limiters' keys, and a cache miss costs one extra round
// trip. Do not share the key with a limiter's state or another data type ([ErrForeignData]).
//
// # Cache
//
// [DenyList.IsDenied] caches both answers (denied and allowed) for a fixed duration ([WithCacheDuration],
// default 1 s, at most 1 min) counted from the start of the server read; hits do not extend it. The
// cache holds at most [WithCacheCapacity] identities (default 1024); when full, expired entries go
// first, then the least recently used one. A zero duration disables the cache and read sharing: every
// call reads the server.
//
// Concurrent misses for one identity share one server read while that read is younger than the cache
// duration; a later miss starts a fresh read, while callers already waiting keep the result of the read
// they joined. A shared read runs in its own goroutine with a context detached from its callers
// (context.WithoutCancel of the first caller's context, so values are kept) and bounded by
// [WithDenyListReadTimeout] (default 5 s) and by [DenyList.Close]: cancelling one caller ends only that
// caller's wait, never the read the others wait for. The number of shared reads in flight is bounded by
// the cache capacity; a miss for another identity beyond that bound reads the server directly with the
// caller's context and caches nothing.
//
// [DenyList.Invalidate] (and every [DenyList.SetDenied], before and after its write) empties the cache
// and detaches the reads in flight: they still answer their waiters but no longer fill the cache, and
// later misses never join them. Other instances and other processes see a change when their entries
// expire or after their own Invalidate: there is no cross-process invalidation. The same delay applies
// to SADD and SREM sent by anything else.
//
// During an outage, cached answers are served until they expire; a miss returns the read's error
// (never cached), which makes the limiter's call fail without acquiring capacity.
//
// Membership and capacity are checked in separate round trips, not atomically: a change does not revoke
// an admission in progress, even with caching disabled. The deny list is an admission filter with
// bounded staleness, not an authorization mechanism.
//
// The in-flight bookkeeping is a small map keyed by identity, with a generation number for
// invalidation, rather than golang.org/x/sync/singleflight: singleflight has no notion of a read's age
// and would need Forget calls to detach reads, so the map states the rules directly.
//
// A DenyList is safe for concurrent use. Its background work is the goroutines of shared reads, each
// ending when its read does (at the latest after the read timeout); [DenyList.Close] ends them at
// once and waits for them. It never closes the client.
type DenyList struct {
	client rueidis.Client
	name   string // the key as given to NewDenyList, returned by Key
	key    string
	cfg    denyConfig
	// read asks the server whether identity is denied: serverRead, except in unit tests.
	read func(ctx context.Context, identity string) (bool, error)

	// stop is cancelled by Close; it ends shared reads.
	stop     context.Context
	stopFunc context.CancelFunc
	wg       sync.WaitGroup // shared-read goroutines

	mu       sync.Mutex
	closed   bool
	gen      uint64 // incremented by every invalidation
	cache    denyCache
	inflight map[string]*denyRead // shared reads of the current generation

	hits, misses, shared, reads atomic.Int64
}

// denyRead is one shared server read. Its fields other than done are written once, before done is
// closed.
type denyRead struct {
	start  time.Time // local clock when the read started; the cache entry expires start+duration
	gen    uint64
	done   chan struct{}
	denied bool
	err    error
}

// DenyListStats counts the reads of one [DenyList] instance since [NewDenyList]. Every
// [DenyList.IsDenied] call that gets past validation counts once as a hit or a miss.
type DenyListStats struct {
	// Hits is the number of calls answered from the cache, without I/O.
	Hits int64
	// Misses is the number of calls not answered from the cache: they joined a shared read, started
	// one, or read the server directly (caching disabled or in-flight bound reached).
	Misses int64
	// SharedReads is the number of misses that joined a read already in flight instead of sending
	// their own.
	SharedReads int64
	// ServerReads is the number of membership reads sent (or being sent) to the server. Misses =
	// SharedReads + ServerReads, except for calls whose context ended before a read started.
	ServerReads int64
	// Cached is the number of identities in the cache now, expired entries not yet removed included.
	Cached int
}

// DenyListOption configures a [DenyList] ([NewDenyList]). It is a type of its own (not an [Option]),
// so a limiter option given to NewDenyList, or a deny-list option given to [New], does not compile.
// Options are applied in order; an invalid value, or a nil DenyListOption, makes NewDenyList fail
// with an error matching [ErrInvalidConfig].
type DenyListOption interface {
	applyDeny(*denyConfig) error
}

type denyOptionFunc func(*denyConfig) error

func (f denyOptionFunc) applyDeny(c *denyConfig) error { return f(c) }

type denyConfig struct {
	cacheDuration time.Duration
	cacheCapacity int
	readTimeout   time.Duration
	keys          luakit.Keyspace
	now           func() time.Time // the local clock; replaced in unit tests
	hooks         luakit.Hooks     // WithHooks
	name          string           // WithName
}

func defaultDenyConfig() denyConfig {
	return denyConfig{
		cacheDuration: DefaultCacheDuration,
		cacheCapacity: DefaultCacheCapacity,
		readTimeout:   DefaultDenyListReadTimeout,
		now:           time.Now,
	}
}

// WithCacheDuration sets how long a [DenyList] caches a membership read, counted from the start of the
// read (at nanosecond precision: no rounding). d must be between 0 and [MaxCacheDuration] (1 minute);
// 0 disables the cache and read sharing, so every [DenyList.IsDenied] reads the server. Default:
// [DefaultCacheDuration] (1 second).
func WithCacheDuration(d time.Duration) DenyListOption {
	return denyOptionFunc(func(c *denyConfig) error {
		if d < 0 || d > MaxCacheDuration {
			return invalidConfig("deny-list cache duration %v must be between 0 and %v", d, MaxCacheDuration)
		}
		c.cacheDuration = d
		return nil
	})
}

// WithCacheCapacity sets how many identities a [DenyList] caches at most, which also bounds the number
// of shared reads in flight. n must be positive; use [WithCacheDuration](0) to disable the cache.
// Default: [DefaultCacheCapacity] (1024).
func WithCacheCapacity(n int) DenyListOption {
	return denyOptionFunc(func(c *denyConfig) error {
		if n <= 0 {
			return invalidConfig("deny-list cache capacity %d must be positive", n)
		}
		c.cacheCapacity = n
		return nil
	})
}

// WithDenyListKeyPrefix prepends prefix to the deny list's key, like a prefixed client view. The
// prefix is binary-safe; [DenyList.Key] returns the key without it. Default: no prefix.
func WithDenyListKeyPrefix(prefix string) DenyListOption {
	return denyOptionFunc(func(c *denyConfig) error {
		c.keys = luakit.NewKeyspace(prefix)
		return nil
	})
}

// WithDenyListReadTimeout bounds a shared membership read: the read runs detached from its callers
// (so that one caller's cancellation cannot fail the others) and gives up after d; its waiters then get
// an error. Callers with a shorter deadline stop waiting at their own deadline. Reads that are not
// shared (cache disabled, or the in-flight bound reached) use the caller's context instead. d must be
// positive. Default: [DefaultDenyListReadTimeout] (5 seconds).
func WithDenyListReadTimeout(d time.Duration) DenyListOption {
	return denyOptionFunc(func(c *denyConfig) error {
		if d <= 0 {
			return invalidConfig("deny-list read timeout %v must be positive", d)
		}
		c.readTimeout = d
		return nil
	})
}

// NewDenyList returns a DenyList over the set at key (after the [WithDenyListKeyPrefix] prefix). It
// does no I/O and starts no goroutine. It returns an error wrapping [ErrNilClient] for a nil client;
// every other error matches [ErrInvalidConfig]: one wrapping luakit.ErrEmptyKey for an empty key, or
// the error of an invalid option.
func NewDenyList(client rueidis.Client, key string, opts ...DenyListOption) (*DenyList, error) {
	if client == nil {
		return nil, errNilClient
	}
	if key == "" {
		return nil, emptyKey("deny-list key")
	}
	cfg := defaultDenyConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalidConfig("nil deny-list option")
		}
		if err := o.applyDeny(&cfg); err != nil {
			return nil, err
		}
	}
	d := newDenyList(cfg, nil)
	d.client, d.name, d.key = client, key, cfg.keys.Key(key)
	d.read = d.serverRead
	return d, nil
}

// newDenyList returns a DenyList with cfg and read (which may be nil and set later).
func newDenyList(cfg denyConfig, read func(context.Context, string) (bool, error)) *DenyList {
	d := &DenyList{
		cfg:      cfg,
		read:     read,
		cache:    newDenyCache(cfg.cacheCapacity),
		inflight: make(map[string]*denyRead),
	}
	d.stop, d.stopFunc = context.WithCancel(context.Background())
	return d
}

// Key returns the deny list's key as given to [NewDenyList], without the [WithDenyListKeyPrefix]
// prefix (the server key is the prefix followed by it).
func (d *DenyList) Key() string { return d.name }

// SetDenied adds identity to the set (denied true) or removes it (false), in one script (one round
// trip). identity must not be empty ([ErrEmptyIdentity], before any I/O).
//
// The calling instance's cache is emptied and its reads in flight are detached (as by
// [DenyList.Invalidate]) before the write and again after it, even when the write fails, so that the
// next IsDenied on this instance reads the server. A call rejected before I/O (empty identity, ctx
// already done, [ErrClosed] after Close) leaves the cache as it was. Other instances and processes see
// the change when their cache entries expire.
//
// It blocks until the reply or until ctx ends. A failure after the script may have reached the server
// (timeout, cancellation, broken connection) wraps [ErrUncertain]: the write may have happened, so
// read again (IsDenied, whose cache was emptied) to learn the membership. A key of another type is
// [ErrForeignData] with nothing written. Concurrent writes take effect in the order the server runs them.
// Safe for concurrent use.
func (d *DenyList) SetDenied(ctx context.Context, identity string, denied bool) (err error) {
	ctx, sc, err := d.cfg.hooks.Begin(ctx, op(opDenyWrite, d.cfg.name))
	if err != nil {
		return err
	}
	defer func() { sc.End(err) }()
	if identity == "" {
		return ErrEmptyIdentity
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: deny-list write: %w", err)
	}
	arg := "0"
	if denied {
		arg = "1"
	}
	d.Invalidate()
	// No deadline on the wire (see runShared): the caller's cancellation and deadline still end the
	// wait, and the connection, shared with every other command of the client, stays open.
	wctx, stopWatch := luakit.WithoutDeadline(ctx)
	err = denyWriteScript.Exec(wctx, d.client, []string{d.key}, []string{identity, arg}).Error()
	stopWatch()
	d.Invalidate()
	if err == nil {
		return nil
	}
	switch {
	case isWrongType(err):
		return fmt.Errorf("ratelimit: deny-list write: %w: %w", ErrForeignData, err)
	case luakit.Classify(err) == luakit.ClassUncertain || luakit.Classify(err) == luakit.ClassUnknown:
		return fmt.Errorf("ratelimit: deny-list write: %w: %w", ErrUncertain, err)
	}
	return fmt.Errorf("ratelimit: deny-list write: %w", err)
}

// IsDenied reports whether identity is on the deny list, from the cache or from one server read
// (shared with concurrent callers asking about the same identity; see [DenyList]). identity must not
// be empty ([ErrEmptyIdentity], before any I/O).
//
// A cache hit needs no I/O and succeeds even while the server is unreachable. On a miss it blocks until
// the read answers or ctx ends; when ctx ends first it returns an error wrapping ctx.Err(), and a
// shared read continues for its other callers. Read failures are returned (wrapped; a key of another
// type is [ErrForeignData]) and never cached. After [DenyList.Close] it returns [ErrClosed]. Safe for
// concurrent use.
func (d *DenyList) IsDenied(ctx context.Context, identity string) (bool, error) {
	ctx, sc, err := d.cfg.hooks.Begin(ctx, op(opDenyRead, d.cfg.name))
	if err != nil {
		return false, err
	}
	denied, err := d.isDenied(ctx, identity)
	sc.End(err)
	return denied, err
}

// isDenied is IsDenied without admission: the limiters' own deny-list checks use it.
func (d *DenyList) isDenied(ctx context.Context, identity string) (bool, error) {
	if identity == "" {
		return false, ErrEmptyIdentity
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return false, errClosed
	}
	now := d.cfg.now()
	if d.cfg.cacheDuration > 0 {
		if denied, ok := d.cache.get(identity, now); ok {
			d.mu.Unlock()
			d.hits.Add(1)
			return denied, nil
		}
	}
	d.misses.Add(1)
	if d.cfg.cacheDuration == 0 {
		d.mu.Unlock()
		return d.readDirect(ctx, identity)
	}
	if r := d.inflight[identity]; r != nil {
		if now.Sub(r.start) < d.cfg.cacheDuration {
			d.mu.Unlock()
			d.shared.Add(1)
			return d.wait(ctx, r)
		}
		// Too old to share: its waiters keep it, later callers start a fresh read. Its result expires
		// before it could be cached, so it cannot refill the cache.
		delete(d.inflight, identity)
	}
	if len(d.inflight) >= d.cfg.cacheCapacity {
		d.mu.Unlock()
		return d.readDirect(ctx, identity)
	}
	if err := ctx.Err(); err != nil {
		d.mu.Unlock()
		return false, fmt.Errorf("ratelimit: deny-list read: %w", err)
	}
	r := &denyRead{start: now, gen: d.gen, done: make(chan struct{})}
	d.inflight[identity] = r
	d.wg.Add(1)
	d.mu.Unlock()
	d.reads.Add(1)
	go d.runShared(context.WithoutCancel(ctx), identity, r)
	return d.wait(ctx, r)
}

// runShared performs the shared read r and publishes its result to r's waiters and, unless r was
// detached meanwhile, to the cache.
func (d *DenyList) runShared(detached context.Context, identity string, r *denyRead) {
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(detached, d.cfg.readTimeout)
	defer cancel()
	stopAfter := context.AfterFunc(d.stop, cancel) // Close ends the read at once
	defer stopAfter()
	// No deadline on the wire: rueidis would send a command with a deadline synchronously and close
	// the (shared) connection when the deadline passes, failing other commands on it. The deadline
	// still ends this read (luakit.WithoutDeadline watches it).
	ctx, stopWatch := luakit.WithoutDeadline(ctx)
	defer stopWatch()

	denied, err := d.read(ctx, identity)
	if err != nil && d.stop.Err() != nil {
		err = fmt.Errorf("ratelimit: %w: deny-list read ended by Close: %w", ErrClosed, err)
	}

	d.mu.Lock()
	if d.inflight[identity] == r {
		delete(d.inflight, identity)
	}
	if err == nil && r.gen == d.gen && !d.closed {
		d.cache.put(identity, denied, r.start.Add(d.cfg.cacheDuration), d.cfg.now())
	}
	d.mu.Unlock()

	r.denied, r.err = denied, err
	close(r.done)
}

// wait returns r's result, or ctx's error if ctx ends first.
func (d *DenyList) wait(ctx context.Context, r *denyRead) (bool, error) {
	select {
	case <-r.done:
		return r.denied, r.err
	case <-ctx.Done():
		select {
		case <-r.done: // both ready: the answer is more useful
			return r.denied, r.err
		default:
		}
		return false, fmt.Errorf("ratelimit: deny-list read: %w", ctx.Err())
	}
}

// readDirect reads the server with the caller's ctx, caching nothing. Like a shared read, the command
// carries no deadline on the wire (see runShared): with one, rueidis may send it synchronously on an
// idle connection, where the caller's cancellation is not observed until a socket timeout that also
// closes the connection shared with the client's other commands.
func (d *DenyList) readDirect(ctx context.Context, identity string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("ratelimit: deny-list read: %w", err)
	}
	d.reads.Add(1)
	rctx, stopWatch := luakit.WithoutDeadline(ctx)
	defer stopWatch()
	return d.read(rctx, identity)
}

// serverRead runs the membership script.
func (d *DenyList) serverRead(ctx context.Context, identity string) (bool, error) {
	v, err := denyReadScript.Exec(ctx, d.client, []string{d.key}, []string{identity}).AsInt64()
	if err != nil {
		if isWrongType(err) {
			return false, fmt.Errorf("ratelimit: deny-list read: %w: %w", ErrForeignData, err)
		}
		return false, fmt.Errorf("ratelimit: deny-list read: %w", err)
	}
	return v == 1, nil
}

// Invalidate empties this instance's cache and detaches its reads in flight: they still answer the
// callers waiting for them but do not fill the cache, and later calls do not join them. It does no I/O
// and never blocks on the server. Other instances are not affected. Safe for concurrent use.
func (d *DenyList) Invalidate() {
	d.mu.Lock()
	d.invalidateLocked()
	d.mu.Unlock()
}

func (d *DenyList) invalidateLocked() {
	d.gen++
	d.cache.clear()
	clear(d.inflight)
}

// Stats returns this instance's counters. Safe for concurrent use; the fields are read one by one, so
// a snapshot taken while calls run may be slightly inconsistent between fields.
func (d *DenyList) Stats() DenyListStats {
	d.mu.Lock()
	cached := d.cache.len()
	d.mu.Unlock()
	return DenyListStats{
		Hits:        d.hits.Load(),
		Misses:      d.misses.Load(),
		SharedReads: d.shared.Load(),
		ServerReads: d.reads.Load(),
		Cached:      cached,
	}
}

// Close empties the cache, ends the shared reads in flight (their waiters get an error wrapping
// [ErrClosed]) and waits for their goroutines to return until ctx ends; then it returns an error
// wrapping ctx.Err() (the reads, already cancelled, end on their own). Otherwise it returns nil.
// Later IsDenied and SetDenied calls return [ErrClosed]; limiters bound to the deny list then fail
// their calls with it. Reads that use a caller's context (cache disabled) end with that context.
// Close never closes the client; it is idempotent (a later call waits again) and safe for concurrent
// use.
func (d *DenyList) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		d.invalidateLocked()
	}
	d.mu.Unlock()
	d.stopFunc()
	return waitStopped(ctx, &d.wg)
}

// isWrongType reports whether err is a WRONGTYPE reply.
func isWrongType(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

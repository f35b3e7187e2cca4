package denylist

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit/internal/denyaccess"
	"github.com/coordkit/coordkit/ratelimit/internal/stopwait"
)

// List is a deny list over one server set (see the package documentation). The zero value is not
// usable; create one with [New].
type List struct {
	client rueidis.Client
	name   string // the key as given to New, returned by Key
	key    string
	cfg    config
	// read asks the server whether identity is denied: serverRead, except in unit tests.
	read func(ctx context.Context, identity string) (bool, error)

	// stop is cancelled by Close; it ends shared reads.
	stop     context.Context
	stopFunc context.CancelFunc
	wg       sync.WaitGroup // shared-read goroutines

	mu       sync.Mutex
	closed   bool
	gen      uint64 // incremented by every invalidation
	cache    cache
	inflight map[string]*sharedRead // shared reads of the current generation

	hits, misses, shared, reads atomic.Int64
}

// sharedRead is one shared server read. Its fields other than done are written once, before done is
// closed.
type sharedRead struct {
	start  time.Time // local clock when the read started; the cache entry expires start+duration
	gen    uint64
	done   chan struct{}
	denied bool
	err    error
}

// Stats counts the reads of one [List] instance since [New]. Every [List.IsDenied] call that gets
// past validation counts once as a hit or a miss.
type Stats struct {
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

// New returns a List over the set at key (after the [WithKeyPrefix] prefix). It does no I/O and
// starts no goroutine. It returns an error wrapping [ErrNilClient] for a nil client; every other error
// matches [ErrInvalidConfig]: one wrapping luakit.ErrEmptyKey for an empty key, or the error of an
// invalid option.
func New(client rueidis.Client, key string, opts ...Option) (*List, error) {
	if client == nil {
		return nil, errNilClient
	}
	if key == "" {
		return nil, errEmptyKey
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	d := newList(cfg, nil)
	d.client, d.name, d.key = client, key, cfg.keys.Key(key)
	d.read = d.serverRead
	return d, nil
}

// newList returns a List with cfg and read (which may be nil and set later).
func newList(cfg config, read func(context.Context, string) (bool, error)) *List {
	d := &List{
		cfg:      cfg,
		read:     read,
		cache:    newCache(cfg.cacheCapacity),
		inflight: make(map[string]*sharedRead),
	}
	d.stop, d.stopFunc = context.WithCancel(context.Background())
	return d
}

// Key returns the deny list's key as given to [New], without the [WithKeyPrefix] prefix (the server
// key is the prefix followed by it).
func (d *List) Key() string { return d.name }

// SetDenied adds identity to the set (denied true) or removes it (false), in one script (one round
// trip). identity must not be empty ([ErrEmptyIdentity], before any I/O).
//
// The calling instance's cache is emptied and its reads in flight are detached (as by
// [List.Invalidate]) before the write and again after it, even when the write fails, so that the
// next IsDenied on this instance reads the server. A call rejected before I/O (empty identity, ctx
// already done, [ErrClosed] after Close) leaves the cache as it was. Other instances and processes see
// the change when their cache entries expire.
//
// It blocks until the reply or until ctx ends. A failure after the script may have reached the server
// (timeout, cancellation, broken connection) wraps [ErrUncertain]: the write may have happened, so
// read again (IsDenied, whose cache was emptied) to learn the membership. A key of another type is
// [ErrForeignData] with nothing written. Concurrent writes take effect in the order the server runs them.
// Safe for concurrent use.
func (d *List) SetDenied(ctx context.Context, identity string, denied bool) error {
	ctx, sc, err := d.cfg.hooks.Begin(ctx, op(opWrite, d.cfg.instance))
	if err != nil {
		return err
	}
	err = d.setDenied(ctx, identity, denied)
	sc.End(err)
	return err
}

func (d *List) setDenied(ctx context.Context, identity string, denied bool) error {
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
	err := writeScript.Exec(wctx, d.client, []string{d.key}, []string{identity, arg}).Error()
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
// (shared with concurrent callers asking about the same identity; see [List]). identity must not
// be empty ([ErrEmptyIdentity], before any I/O).
//
// A cache hit needs no I/O and succeeds even while the server is unreachable. On a miss it blocks until
// the read answers or ctx ends; when ctx ends first it returns an error wrapping ctx.Err(), and a
// shared read continues for its other callers. Read failures are returned (wrapped; a key of another
// type is [ErrForeignData]) and never cached. After [List.Close] it returns [ErrClosed]. Safe for
// concurrent use.
func (d *List) IsDenied(ctx context.Context, identity string) (bool, error) {
	ctx, sc, err := d.cfg.hooks.Begin(ctx, op(opRead, d.cfg.instance))
	if err != nil {
		return false, err
	}
	denied, err := d.isDenied(ctx, identity)
	sc.End(err)
	return denied, err
}

// isDenied is IsDenied without admission: the limiters' own deny-list checks use it.
func (d *List) isDenied(ctx context.Context, identity string) (bool, error) {
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
	r := &sharedRead{start: now, gen: d.gen, done: make(chan struct{})}
	d.inflight[identity] = r
	d.wg.Add(1)
	d.mu.Unlock()
	d.reads.Add(1)
	go d.runShared(context.WithoutCancel(ctx), identity, r)
	return d.wait(ctx, r)
}

// runShared performs the shared read r and publishes its result to r's waiters and, unless r was
// detached meanwhile, to the cache.
func (d *List) runShared(detached context.Context, identity string, r *sharedRead) {
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
func (d *List) wait(ctx context.Context, r *sharedRead) (bool, error) {
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
func (d *List) readDirect(ctx context.Context, identity string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("ratelimit: deny-list read: %w", err)
	}
	d.reads.Add(1)
	rctx, stopWatch := luakit.WithoutDeadline(ctx)
	defer stopWatch()
	return d.read(rctx, identity)
}

// serverRead runs the membership script.
func (d *List) serverRead(ctx context.Context, identity string) (bool, error) {
	v, err := readScript.Exec(ctx, d.client, []string{d.key}, []string{identity}).AsInt64()
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
func (d *List) Invalidate() {
	d.mu.Lock()
	d.invalidateLocked()
	d.mu.Unlock()
}

func (d *List) invalidateLocked() {
	d.gen++
	d.cache.clear()
	clear(d.inflight)
}

// Stats returns this instance's counters. Safe for concurrent use; the fields are read one by one, so
// a snapshot taken while calls run may be slightly inconsistent between fields.
func (d *List) Stats() Stats {
	d.mu.Lock()
	cached := d.cache.len()
	d.mu.Unlock()
	return Stats{
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
func (d *List) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		d.invalidateLocked()
	}
	d.mu.Unlock()
	d.stopFunc()
	return stopwait.Wait(ctx, &d.wg)
}

func init() {
	denyaccess.IsDenied = func(ctx context.Context, list any, identity string) (bool, error) {
		return list.(*List).isDenied(ctx, identity)
	}
}

package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit/internal/stopwait"
)

// Limiter is one rate limit over one server key. Every decision is one script on the server using the
// server's clock; the limiter keeps only local state: its settings, the optional wait queue
// ([WithQueue]) and statistics. Several processes (or several Limiters) with the same settings on the
// same key share one limit.
//
// A Limiter is safe for concurrent use by many goroutines. The zero value is not usable; create one
// with [New]. Close it when done: its background work is the goroutine serving the wait queue
// ([WithQueue]), which Close ends. It never closes the client.
type Limiter struct {
	client rueidis.Client
	name   string // the key as given to New, returned by Key
	key    string // physical key, prefix included
	m      *metrics
	st     *counts

	deny     denyFunc // nil without WithDenyList
	identity string

	hooks luakit.Hooks // WithHooks; nil for the per-key limiters of a Keyed (the Keyed admits)
	inst  string       // WithInstance

	queueLimit    int64
	queueOrder    QueueOrder
	updateTimeout time.Duration

	closeCtx context.Context // cancelled by Close: ends in-flight queue attempts
	closeFn  context.CancelFunc
	updSem   chan struct{} // one Update at a time
	pumpWG   sync.WaitGroup

	mu sync.Mutex
	// Settings, published together by Update.
	cur *compiled
	pol Policy
	// The update barrier: attempts count themselves in state (lock-free on the decision path); an
	// Update sets updating (and updatingBit in state) under mu, waits for the count to reach 0, and
	// gate is closed (then replaced) whenever either changes so that waiters re-check.
	updating bool
	gate     chan struct{}
	closed   bool
	closeErr error // why the limiter closed (ErrClosed, or wrapping a failed migration)
	q        queue

	// Lock-free on the decision path: closedFlag mirrors closed; busy counts calls in progress
	// (AllowN / WaitN, queued ones included) and idleSince is when the last one ended, as the
	// monotonic time since born.
	closedFlag atomic.Bool
	state      atomic.Int64             // attempts in progress, plus updatingBit while an Update waits or runs
	curP       atomic.Pointer[compiled] // mirrors cur, read lock-free by attempts
	busy       atomic.Int64
	idleSince  atomic.Int64
	born       time.Time
}

// New returns a Limiter enforcing policy at key (after the [WithKeyPrefix] prefix). It does no I/O.
//
// key is binary-safe, must not be empty, and needs no hash tag on Cluster (one key per limiter).
// Dedicate the key to this limiter's algorithm and settings: every process sharing it must use the
// same policy. The policy is copied; its durations round up to whole microseconds (see [Limiter.Policy]).
//
// New returns an error wrapping [ErrNilClient] for a nil client; every other error matches
// [ErrInvalidConfig]: one wrapping [ErrInvalidPolicy] naming the bad field, one wrapping
// luakit.ErrEmptyKey for an empty key, or the error of an invalid option.
func New(client rueidis.Client, key string, policy Policy, opts ...Option) (*Limiter, error) {
	if client == nil {
		return nil, errNilClient
	}
	if key == "" {
		return nil, errEmptyKey
	}
	c, err := compile(clonePolicy(policy))
	if err != nil {
		return nil, err
	}
	policy = c.src // durations rounded up to whole µs: what is enforced
	cfg, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.provider(), cfg.instance)
	if err != nil {
		return nil, err
	}
	l := newLimiter(client, key, c, policy, cfg, m, cfg.deny, cfg.identity)
	l.hooks, l.inst = cfg.hooks, cfg.instance
	return l, nil
}

// errNilClient is the error of every constructor given a nil client.
var errNilClient = fmt.Errorf("ratelimit: %w", ErrNilClient)

// errClosed is the error of calls after Close.
var errClosed = fmt.Errorf("ratelimit: %w", ErrClosed)

// newLimiter builds a Limiter over name (the physical key is cfg's prefix + name); Keyed uses it for
// its per-key local state.
func newLimiter(client rueidis.Client, name string, c *compiled, p Policy, cfg config, m *metrics,
	deny denyFunc, identity string) *Limiter {
	closeCtx, closeFn := context.WithCancel(context.Background())
	l := &Limiter{
		client:        client,
		name:          name,
		key:           cfg.keys.Key(name),
		m:             m,
		st:            newCounts(),
		deny:          deny,
		identity:      identity,
		queueLimit:    cfg.queueLimit,
		queueOrder:    cfg.queueOrder,
		updateTimeout: cfg.updateTimeout,
		closeCtx:      closeCtx,
		closeFn:       closeFn,
		updSem:        make(chan struct{}, 1),
		cur:           c,
		pol:           p,
		gate:          make(chan struct{}),
		born:          time.Now(),
	}
	l.curP.Store(c)
	return l
}

// Allow is AllowN(ctx, 1).
func (l *Limiter) Allow(ctx context.Context) (Result, error) { return l.AllowN(ctx, 1) }

// AllowN decides n permits now, in one round trip, without waiting and without the queue. n = 0
// probes whether one permit is available and writes nothing. n above the capacity (or, for a [Keyed],
// above the Limit of stored settings of a higher policy version) is rejected without RetryAfter and
// without a capacity script. With [WithDenyList] the identity is checked first: a denied identity is
// a rejection with [ReasonDenyList] that touches no capacity, and a deny-list read error is returned.
// AllowN waits only while an [Limiter.Update] is in progress (honouring ctx). Errors:
// [ErrNegativePermits] for n < 0 (before any I/O), [ErrClosed] after Close, [ErrConfigMismatch] or
// [ErrForeignData] when the key holds other settings or data (nothing consumed), the context's error,
// or a server error, each wrapped with a "ratelimit: " prefix; one wrapping [ErrUncertain] means the
// script may have run and consumed the permits. Each call that returns a Result counts once in
// [Stats] and the metrics.
func (l *Limiter) AllowN(ctx context.Context, n int64) (Result, error) {
	ctx, sc, err := l.hooks.Begin(ctx, op(opAcquire, l.inst))
	if err != nil {
		return Result{}, err
	}
	res, err := l.allowN(ctx, n)
	endDecision(&sc, err)
	return res, err
}

// allowN is AllowN without admission (the per-key limiters of a Keyed use it).
func (l *Limiter) allowN(ctx context.Context, n int64) (Result, error) {
	if n < 0 {
		return Result{}, ErrNegativePermits
	}
	if err := l.begin(); err != nil {
		return Result{}, err
	}
	defer l.end()
	res, err := l.attempt(ctx, n, true, nil)
	if err != nil {
		return Result{}, err
	}
	l.m.record(l.st, res)
	return res, nil
}

// attempt is one decision: the deny-list check (when bound and checkDeny), then one script under the
// update barrier. It records the latest availability but counts no outcome. w is the queued waiter
// the pump attempts for (nil otherwise): w.sent is set once the script may be sent.
func (l *Limiter) attempt(ctx context.Context, n int64, checkDeny bool, w *waiter) (Result, error) {
	if checkDeny {
		if res, denied, err := l.denied(ctx); err != nil || denied {
			return res, err
		}
	}
	c, err := l.enter(ctx, w)
	if err != nil {
		return Result{}, err
	}
	d, err := c.decide(ctx, l.client, l.key, n)
	l.leave()
	if err != nil {
		return Result{}, err
	}
	if !d.at.IsZero() {
		l.st.available.Store(d.remaining)
	}
	return resultOf(d), nil
}

// denied checks the deny list when one is bound.
func (l *Limiter) denied(ctx context.Context) (Result, bool, error) {
	if l.deny == nil {
		return Result{}, false, nil
	}
	denied, err := l.deny(ctx, l.identity)
	if err != nil {
		return Result{}, false, err
	}
	if !denied {
		return Result{}, false, nil
	}
	return l.deniedResult(), true, nil
}

// current returns the settings in force now.
func (l *Limiter) current() *compiled { return l.curP.Load() }

func (l *Limiter) deniedResult() Result {
	return Result{Reason: ReasonDenyList, Limit: l.current().capacity()}
}

func resultOf(d decision) Result {
	r := Result{
		Allowed:    d.allowed,
		Remaining:  d.remaining,
		Limit:      d.limit,
		RetryAfter: d.retryAfter,
		Reset:      d.reset,
		At:         d.at,
		Component:  d.component,
	}
	if !d.allowed {
		r.Reason = ReasonCapacity
	} else {
		r.RetryAfter = 0
	}
	return r
}

// begin marks a call in progress (for IdleDuration) unless the limiter is closed.
func (l *Limiter) begin() error {
	if l.closedFlag.Load() {
		return l.closedErr()
	}
	l.busy.Add(1)
	return nil
}

func (l *Limiter) end() {
	if l.busy.Add(-1) == 0 {
		l.idleSince.Store(int64(time.Since(l.born)))
	}
}

// Policy returns the current settings as enforced: those given to New or to the last successful
// Update with every duration rounded up to whole microseconds and a [SlidingWindow]'s Segments 0
// reported as [DefaultSegments] (standalone or in a composite), as a copy made of plain values (a
// pointer policy or component is returned as the value it pointed to when given; a Composite has its
// own component list). It is safe to call concurrently with Update.
func (l *Limiter) Policy() Policy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return clonePolicy(l.pol)
}

// Key returns the limiter's key as given to [New], without the [WithKeyPrefix] prefix (the server
// key is the prefix followed by it).
func (l *Limiter) Key() string { return l.name }

// Stats returns this instance's statistics: final outcomes of AllowN and WaitN, permits waiting in the
// queue now, and the Remaining of the latest server reply (-1 before the first). It does no I/O.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	queued := l.q.permits
	l.mu.Unlock()
	return Stats{
		Granted:   l.st.granted.Load(),
		Rejected:  l.st.rejected.Load(),
		Queued:    queued,
		Available: l.st.available.Load(),
	}
}

// IdleDuration returns how long the limiter has had no AllowN or WaitN call in progress or waiting
// (since New when it never had one); ok is false while one is. A limiter's state lives in the server,
// so an idle limiter can be closed and rebuilt without losing usage.
func (l *Limiter) IdleDuration() (time.Duration, bool) {
	if l.busy.Load() > 0 {
		return 0, false
	}
	return max(time.Since(l.born)-time.Duration(l.idleSince.Load()), 0), true
}

// Close fails requests waiting in the queue with [ErrClosed], makes later calls (and Updates) return
// ErrClosed, cancels the attempt the queue's goroutine has in flight, and waits for that goroutine to
// return until ctx ends; then it returns an error wrapping ctx.Err() (the goroutine, already told to
// stop, ends on its own). Otherwise it returns nil. Calls deciding at that moment finish normally. It
// never closes the client. Close is idempotent: a later call waits again and returns nil once the
// goroutine has ended. Safe for concurrent use.
func (l *Limiter) Close(ctx context.Context) error {
	l.shutdown(errClosed)
	return stopwait.Wait(ctx, &l.pumpWG)
}

// shutdown marks the limiter closed with err (wrapping ErrClosed) and fails the queue's waiters.
func (l *Limiter) shutdown(err error) {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		l.closedFlag.Store(true)
		l.closeErr = err
		l.failQueueLocked(err)
		l.openGateLocked()
	}
	l.mu.Unlock()
	l.closeFn()
}

func (l *Limiter) closedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closeErr != nil {
		return l.closeErr
	}
	return errClosed
}

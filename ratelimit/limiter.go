package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
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

// clonePolicy copies p into plain values: a pointer policy becomes the value it points to, and a
// Composite gets its own component list (of values), so that later changes by the caller, through
// the slice or a pointer, cannot reach the limiter or what Policy reports, and Policy's dynamic types
// are always the value types. Nil pointers are kept for compile to reject.
func clonePolicy(p Policy) Policy {
	switch v := p.(type) {
	case *FixedWindow:
		if v != nil {
			return *v
		}
	case *SlidingWindow:
		if v != nil {
			return *v
		}
	case *TokenBucket:
		if v != nil {
			return *v
		}
	case *GCRA:
		if v != nil {
			return *v
		}
	case *Composite:
		if v != nil {
			return clonePolicy(*v)
		}
	case Composite:
		comps := make([]Component, len(v.Components))
		for i, c := range v.Components {
			comps[i] = c
			if c == nil {
				continue
			}
			if cc, ok := clonePolicy(c).(Component); ok { // always: a component clones to a component
				comps[i] = cc
			}
		}
		return Composite{Components: comps}
	}
	return p
}

// Allow is AllowN(ctx, 1).
func (l *Limiter) Allow(ctx context.Context) (Result, error) { return l.AllowN(ctx, 1) }

// AllowN decides n permits now, in one round trip, without waiting and without the queue. n = 0
// probes whether one permit is available and writes nothing. A request for more permits than the
// capacity is rejected without a capacity script and without RetryAfter (not an error; a bound deny
// list is still checked first). A [Keyed] request above the Limit of the stored settings (of a
// higher policy version) its decision applied is rejected without RetryAfter too.
//
// With a deny list ([WithDenyList]) the identity is checked first (from the deny list's cache or one
// server read); a denied identity gets a rejection with [ReasonDenyList] and touches no capacity, and
// an error reading the deny list is returned without deciding.
//
// AllowN waits only while an [Limiter.Update] is in progress (honouring ctx). It returns
// [ErrNegativePermits] for n < 0 (before any I/O), [ErrClosed] after Close, [ErrConfigMismatch] or
// [ErrForeignData] when the key holds other settings or data (nothing consumed), the context's error,
// or a server error, each wrapped with a "ratelimit: " prefix; an error wrapping [ErrUncertain] means
// the script may have run and consumed the permits. Each call that returns a Result counts once in
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

// Wait is WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) (Result, error) { return l.WaitN(ctx, 1) }

// WaitN waits until n permits are admitted, ctx ends, or the request can never be admitted; unlike
// [Limiter.AllowN], a WaitN that returns without admission always returns an error (so the usual
// golang.org/x/time/rate pattern "proceed when err is nil" is safe). On such an error the Result is
// the last decision (Allowed false) when there was one, the zero Result otherwise.
//
// Without a queue ([WithQueue] not given, or a limit of 0) each rejection's server-computed
// RetryAfter is slept with a timer (never polling) and the request is decided again in one round
// trip, until admitted. When the sleep would end after ctx's deadline, WaitN returns at once with an
// error wrapping context.DeadlineExceeded instead of sleeping in vain. Other processes can take the
// capacity first: each retry is a new decision.
//
// With a queue, a request that is not admitted, could be admitted later (positive RetryAfter) and
// fits in the queue (n is at most the queue limit) waits for the server-computed RetryAfter (a
// timer, never polling) and retries with one atomic attempt, until admitted. Waiting requests are
// served one at a time in the queue's order (OldestFirst or NewestFirst); while requests wait, a new
// WaitN joins the queue instead of deciding first. When the queue is full, OldestFirst rejects the
// new request and NewestFirst evicts the oldest waiting requests to make room; those requests fail
// with [ErrQueueFull] (so does a request larger than the queue limit that is not admitted at once).
// A queued request rechecks the deny list before every retry and leaves the queue when denied. An
// [Limiter.Update] wakes the queue at once: waiting requests retry with the new settings, and those
// larger than the new capacity fail with [ErrExceedsCapacity]. The queue is local: other processes,
// and other local callers between retries, can take permits first.
//
// Errors for a request that is not admitted: [ErrExceedsCapacity] when n is above the capacity (no
// retry can succeed): at once, before any I/O, for the limiter's own capacity, and on the first
// rejection whose Limit is below n for the settings the server applied ([Keyed] keys stored with a
// higher policy version are decided by their stored settings, whose capacity may be smaller; a
// composite's reply carries the limit of its controlling component), with no further retry, also
// with a queue and also when n is above the queue limit; [ErrDenied] when the identity is on the
// bound deny list; [ErrQueueFull] only for the queue's own rejections, as above (never without a
// queue). If ctx ends while waiting, WaitN returns an error wrapping ctx.Err(), and
// also [ErrUncertain] when a retry was in flight (its script may still consume the permits). Close
// fails waiting requests with [ErrClosed] (also wrapping ErrUncertain for a retry in flight). Other
// errors are those of AllowN. Each call that ends with a decision counts once in [Stats] and the
// metrics (a rejection when it fails with one of the three errors above), however many retries it
// took.
func (l *Limiter) WaitN(ctx context.Context, n int64) (Result, error) {
	ctx, sc, err := l.hooks.Begin(ctx, op(opAcquire, l.inst))
	if err != nil {
		return Result{}, err
	}
	res, err := l.waitN(ctx, n)
	endDecision(&sc, err)
	return res, err
}

// waitN is WaitN without admission (the per-key limiters of a Keyed use it).
func (l *Limiter) waitN(ctx context.Context, n int64) (Result, error) {
	if n < 0 {
		return Result{}, ErrNegativePermits
	}
	if err := l.begin(); err != nil {
		return Result{}, err
	}
	defer l.end()
	var res Result
	var err error
	queued := l.queueLimit > 0
	if !queued {
		res, err = waitLoop(ctx, l.closeCtx, l.closedErr, func() (Result, error) { return l.attempt(ctx, n, true, nil) })
	} else {
		res, err = l.wait(ctx, n)
	}
	if err != nil {
		return res, err
	}
	if !res.Allowed {
		err = notAdmitted(res, n, l.current().capacity(), queued)
	}
	l.m.record(l.st, res)
	return res, err
}

// Errors of a [Limiter.WaitN] or [Keyed.WaitN] that returns without admission. AllowN reports the
// same situations as rejections (Allowed false, with the Reason), not as errors.
var (
	// ErrExceedsCapacity: n is above the policy's capacity (the smallest component limit of a
	// composite), so no wait can admit it. Returned at once, without waiting: before any I/O for the
	// limiter's own capacity, or on the first decision whose Limit is below n (a [Keyed] key decided
	// by stored settings of a higher policy version with a smaller capacity).
	ErrExceedsCapacity = errors.New("ratelimit: request exceeds the capacity")
	// ErrDenied: the identity is on the bound deny list ([WithDenyList], [WithKeyedDenyList]).
	ErrDenied = errors.New("ratelimit: identity is on the deny list")
	// ErrQueueFull: the local wait queue ([WithQueue]) had no room (OldestFirst), evicted the
	// request (NewestFirst), or the request was larger than the queue limit and not admitted at once
	// (but not above the capacity: that is ErrExceedsCapacity). Never returned without a queue.
	ErrQueueFull = errors.New("ratelimit: wait queue full")
)

// notAdmitted is the error of a wait that ends with the rejection res of n permits under a policy
// of the given capacity, queued telling whether the wait used a queue. n above the capacity, or above
// the Limit of the decision (the capacity of the settings the server applied: a Keyed follows stored
// settings of a higher version, which may be smaller than its own), can never be admitted. Without a
// queue nothing else ends a wait without admission (a rejection without RetryAfter is one that no
// retry can admit); with one, the rest are the queue's own rejections.
func notAdmitted(res Result, n, capacity int64, queued bool) error {
	switch {
	case res.Reason == ReasonDenyList:
		return ErrDenied
	case n > capacity || neverAdmissible(res, n) || !queued:
		return ErrExceedsCapacity
	}
	return ErrQueueFull
}

// neverAdmissible reports whether the capacity rejection res shows that n permits can never be
// admitted: n is above the Limit of the settings the decision applied (the controlling component's
// for a composite).
func neverAdmissible(res Result, n int64) bool {
	return !res.Allowed && res.Reason == ReasonCapacity && res.Limit > 0 && n > res.Limit
}

// pastDeadlineError is a wait that returned before the caller's deadline because its next admission
// (in d) would come after it. It wraps context.DeadlineExceeded; its hook outcome is canceled, as if
// the wait had slept until the deadline.
type pastDeadlineError struct{ d time.Duration }

func (e pastDeadlineError) Error() string {
	return fmt.Sprintf("ratelimit: wait: admission in %v would be after the context deadline: %v", e.d, context.DeadlineExceeded)
}

func (pastDeadlineError) Unwrap() error { return context.DeadlineExceeded }

// Is makes errors.Is(err, errPastDeadline) find a pastDeadlineError without allocating.
func (pastDeadlineError) Is(target error) bool { return target == errPastDeadline }

// errPastDeadline is the target that matches any pastDeadlineError.
var errPastDeadline = errors.New("ratelimit: wait: admission would be after the context deadline")

// waitLoop is the wait without a queue: attempt until admitted, sleeping each rejection's
// RetryAfter with a timer. It returns a rejection that can never be admitted (deny list, no
// RetryAfter: n above the capacity or above the Limit of the decision, see compiled.run) as it is,
// for the caller to turn into an error.
func waitLoop(ctx, closeCtx context.Context, closedErr func() error, attempt func() (Result, error)) (Result, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		res, err := attempt()
		if err != nil || res.Allowed || res.Reason != ReasonCapacity || res.RetryAfter <= 0 {
			return res, err
		}
		d := res.RetryAfter
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return res, pastDeadlineError{d}
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return res, fmt.Errorf("ratelimit: wait: %w", ctx.Err())
		case <-closeCtx.Done():
			return res, closedErr()
		}
	}
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

// updatingBit is set in Limiter.state while an Update holds the barrier.
const updatingBit = int64(1) << 62

// enter waits while an Update is in progress, then registers an active attempt and returns the
// settings it must use, marking w (when not nil) as sent. leave must follow. Without w and without
// an Update in progress it takes no lock: one compare-and-swap.
func (l *Limiter) enter(ctx context.Context, w *waiter) (*compiled, error) {
	if w == nil {
		for {
			s := l.state.Load()
			if s&updatingBit != 0 {
				break
			}
			if l.state.CompareAndSwap(s, s+1) {
				if l.closedFlag.Load() {
					l.leave()
					return nil, l.closedErr()
				}
				return l.curP.Load(), nil
			}
		}
	}
	for {
		l.mu.Lock()
		if l.closed {
			err := l.closeErr
			l.mu.Unlock()
			return nil, err
		}
		if !l.updating {
			// updatingBit is only set under mu: it is clear now.
			l.state.Add(1)
			c := l.cur
			if w != nil {
				w.sent, w.used = true, c
			}
			l.mu.Unlock()
			return c, nil
		}
		gate := l.gate
		l.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, fmt.Errorf("ratelimit: waiting for an update: %w", ctx.Err())
		}
	}
}

func (l *Limiter) leave() {
	if l.state.Add(-1) == updatingBit {
		// The last attempt an Update waits for.
		l.mu.Lock()
		l.openGateLocked()
		l.mu.Unlock()
	}
}

// openGateLocked wakes every goroutine waiting on the barrier so that it re-checks its condition.
func (l *Limiter) openGateLocked() {
	close(l.gate)
	l.gate = make(chan struct{})
}

// Update changes the limiter's settings at runtime, keeping the same key. mode must be [Migrate] or
// [Adopt] (the zero UpdateMode is invalid, so that no caller migrates by omission). policy must use
// the same algorithm (for a [Composite], the same number and algorithm of each component). An
// unknown mode or another algorithm returns an error wrapping [ErrInvalidUpdate], and an invalid
// policy one wrapping [ErrInvalidPolicy], all before any I/O, matching [ErrInvalidConfig], with the
// old settings kept. Settings identical after rounding are a no-op without I/O.
//
// Update is a local barrier: new attempts of this instance wait, attempts in progress finish, then
// with [Migrate] one script converts the stored usage to the new settings (see the package
// documentation for each algorithm's rule; an absent key stays absent), and the new settings are
// published together. With [Adopt] nothing is sent: use it on every other instance after one has
// migrated. Updates of one instance are serialized. A successful Update wakes the wait queue at once:
// waiting requests retry with the new settings, and those larger than the new capacity are rejected
// without RetryAfter. A queued request whose attempt is in flight during the Update keeps that
// attempt's admission; if the attempt was rejected, the request retries at once with the new settings
// (or is rejected without RetryAfter when larger than the new capacity).
//
// ctx is honoured while waiting to start (for another Update or for attempts in progress), and then
// the old settings stay usable. Once the migration script is sent, Update waits for its reply even if
// ctx ends, for at most [WithUpdateTimeout] (default 10s), and reports its outcome: a rejection by the
// script before writing ([ErrConfigMismatch], [ErrDebtOverflow], [ErrForeignData]) or by the ACL
// ([ErrNoPermission]: nothing written) keeps the old settings and queue; any other failure, including no reply within the update timeout (wrapping
// [ErrUncertain]), closes the limiter and fails its queued requests, because the server may already
// hold the migrated state
// (reconcile under your rollout barrier before building a replacement; do not blindly retry Migrate).
// Update returns [ErrClosed] on a closed limiter.
//
// Coordinate every process sharing the key (see the package documentation): exactly one migrates,
// the others adopt.
func (l *Limiter) Update(ctx context.Context, policy Policy, mode UpdateMode) error {
	ctx, sc, err := l.hooks.Begin(ctx, op(opUpdate, l.inst))
	if err != nil {
		return err
	}
	err = l.update(ctx, policy, mode)
	sc.End(err)
	return err
}

func (l *Limiter) update(ctx context.Context, policy Policy, mode UpdateMode) error {
	if mode != Migrate && mode != Adopt {
		return fmt.Errorf("%w: unknown update mode %v", ErrInvalidUpdate, mode)
	}
	nc, err := compile(clonePolicy(policy))
	if err != nil {
		return err
	}
	policy = nc.src // durations rounded up to whole µs
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: update: %w", err)
	}
	select {
	case l.updSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("ratelimit: update: %w", ctx.Err())
	case <-l.closeCtx.Done():
		return l.closedErr()
	}
	defer func() { <-l.updSem }()

	l.mu.Lock()
	if l.closed {
		err := l.closeErr
		l.mu.Unlock()
		return err
	}
	cur := l.cur
	l.mu.Unlock()
	if err := cur.compatible(nc); err != nil {
		return err
	}
	if cur.equal(nc) {
		return nil
	}

	if err := l.barrier(ctx); err != nil {
		return err
	}
	if mode == Migrate {
		if err := ctx.Err(); err != nil {
			l.release(nil, nil)
			return fmt.Errorf("ratelimit: update: %w", err)
		}
		// Submitted from here on: the outcome is observed whatever ctx does, bounded by the update
		// timeout alone.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.updateTimeout)
		err := cur.migrate(mctx, l.client, l.key, nc)
		cancel()
		if err != nil {
			if errors.Is(err, ErrConfigMismatch) || errors.Is(err, ErrDebtOverflow) || errors.Is(err, ErrForeignData) ||
				errors.Is(err, ErrNoPermission) {
				// Refused before writing: by the script's own checks, or by the ACL (the server's
				// NOPERM, or the script's check before its first write).
				l.release(nil, nil)
				return err
			}
			l.shutdown(fmt.Errorf("ratelimit: %w after a failed migration: %w", ErrClosed, err))
			l.release(nil, nil)
			return fmt.Errorf("ratelimit: migration failed, limiter closed: %w", err)
		}
	}
	l.release(nc, policy)
	return nil
}

// adopt publishes nc and p locally, without I/O, once the decisions in progress finish (the Adopt
// mode of Update without its compatibility check, for a Keyed's keys).
func (l *Limiter) adopt(ctx context.Context, nc *compiled, p Policy) error {
	select {
	case l.updSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("ratelimit: update: %w", ctx.Err())
	case <-l.closeCtx.Done():
		return l.closedErr()
	}
	defer func() { <-l.updSem }()
	if err := l.barrier(ctx); err != nil {
		return err
	}
	l.release(nc, p)
	return nil
}

// barrier stops new attempts and waits for active ones to finish. On error the barrier is released.
func (l *Limiter) barrier(ctx context.Context) error {
	l.mu.Lock()
	l.updating = true
	l.state.Add(updatingBit)
	for l.state.Load() != updatingBit && !l.closed {
		gate := l.gate
		l.mu.Unlock()
		var err error
		select {
		case <-gate:
		case <-ctx.Done():
			err = fmt.Errorf("ratelimit: update: %w", ctx.Err())
		}
		l.mu.Lock()
		if err != nil {
			l.updating = false
			l.state.Add(-updatingBit)
			l.openGateLocked()
			l.mu.Unlock()
			return err
		}
	}
	if l.closed {
		l.updating = false
		l.state.Add(-updatingBit)
		l.openGateLocked()
		err := l.closeErr
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	return nil
}

// release ends the barrier, publishing nc and p when nc is not nil, and then wakes the queue.
func (l *Limiter) release(nc *compiled, p Policy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if nc != nil {
		l.cur, l.pol = nc, p
		l.curP.Store(nc)
	}
	l.updating = false
	l.state.Add(-updatingBit)
	l.openGateLocked()
	if nc != nil && !l.closed {
		l.wakeQueueLocked(nc.capacity())
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
	return waitStopped(ctx, &l.pumpWG)
}

// waitStopped waits for wg until ctx ends; it returns nil when wg's goroutines have ended (also when
// ctx ended at the same time), otherwise an error wrapping ctx.Err().
func waitStopped(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done:
			return nil
		default:
		}
		return fmt.Errorf("ratelimit: close: %w", ctx.Err())
	}
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

package idempotency

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// The causes with which a [Claim]'s context ends when the claim can no longer be vouched for
// (context.Cause reports them), and KeepAlive's error while one runs. They are luakit's shared values.
var (
	ErrLost             = luakit.ErrLost             // a renewal found no pending claim of this owner: it expired, was abandoned, replaced or completed
	ErrExpired          = luakit.ErrExpired          // no renewal was confirmed before the local estimate of the lease elapsed
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning // a second KeepAlive on one Claim
)

// Claim is the pending claim of a Started [Attempt], held by this process: it keeps the claim alive
// with the owner-token handles' shape (KeepAlive(ctx) error, Context, Done, Err), so work can stop
// when the claim can no longer be vouched for. Make it with [Store.Claim]; complete or abandon the
// claim with [Store.Complete] or [Store.Abandon] after [Claim.Stop]. Safe for concurrent use.
type Claim struct {
	s              *Store
	k, secret, gen string
	ms             int64
	ctx            context.Context
	end            context.CancelCauseFunc
	mu             sync.Mutex
	deadline       time.Time
	expiry         *time.Timer   // ends the claim with ErrExpired at the local estimate
	stop           func()        // stops a running keep-alive; nil when none runs
	keepAliveDone  chan struct{} // closed when the running keep-alive's goroutine returned
}

// Claim returns the [Claim] of a, a Started attempt of key (from [Store.TryBegin] or [Store.Begin]).
// It does no I/O and starts no goroutine; its Context ends with [ErrExpired] at a.Deadline unless
// [Claim.KeepAlive] renews it (a Deadline already past ends it at once).
//
// It fails before anything starts with an error matching luakit.ErrInvalidConfig when a is not
// Started, its token is malformed ([ErrInvalidToken]), its lease is under 1ms or its Deadline is zero,
// or key is empty.
func (s *Store) Claim(key string, a Attempt) (*Claim, error) {
	if a.State != Started {
		return nil, luakit.InvalidConfig("idempotency", "a claim needs a started attempt (got %v)", a.State)
	}
	k, secret, gen, err := s.prepareOwned(key, a.OwnerToken)
	if err != nil {
		return nil, err
	}
	ms, err := millis("claim lease", a.Lease)
	if err != nil {
		return nil, err
	}
	if a.Deadline.IsZero() {
		return nil, luakit.InvalidConfig("idempotency", "a claim needs the attempt's Deadline")
	}
	ctx, end := context.WithCancelCause(context.Background())
	c := &Claim{s: s, k: k, secret: secret, gen: gen, ms: ms, ctx: ctx, end: end, deadline: a.Deadline}
	c.expiry = time.AfterFunc(time.Until(a.Deadline), func() { end(ErrExpired) })
	return c, nil
}

// KeepAlive renews the claim in the background, for its lease ([Store.Extend]) a lease/3 after the
// last confirmed renewal (at once when less is left: ownership.RenewalDue), until ctx ends, [Claim.Stop]
// is called or the claim ends; it returns at once (nil), [ErrKeepAliveRunning] if one runs, or the
// claim's cause once it ended. The claim ends (Context cancelled, Err its cause) when:
//
//   - a renewal finds no pending claim of this owner: [ErrLost] (expired, abandoned, replaced by
//     another caller after expiry, or completed; also a key overwritten with foreign data);
//   - the server refuses a renewal for good (a terminal error, see [luakit.Classify], such as NOPERM):
//     that error, so errors.Is(claim.Err(), ErrNoPermission) reports an ACL refusal;
//   - no renewal is confirmed before the local estimate elapses (failed or uncertain renewals are
//     retried every [WithRetryDelay], at most a quarter of the period): [ErrExpired]; a duplicate may
//     then start, so stop the work.
//
// When ctx ends renewing stops (pass context.WithoutCancel(ctx) to outlive a request). Each renewal
// is the hook operation IDEMPOTENCY EXTEND. KeepAlive never abandons or completes the claim.
func (c *Claim) KeepAlive(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}
	if c.keepAliveDone != nil {
		select {
		case <-c.keepAliveDone:
		default:
			return ErrKeepAliveRunning
		}
	}
	rctx, quit := context.WithCancel(ctx)
	stopOnEnd := context.AfterFunc(c.ctx, quit)
	done := make(chan struct{})
	c.stop, c.keepAliveDone = quit, done
	go func() {
		defer close(done)
		defer stopOnEnd()
		c.keepAlive(rctx)
	}()
	return nil
}

// Stop ends this process's hold of the claim: it stops a running KeepAlive, waits for its goroutine
// (no renewal of it is in flight afterwards, except one whose reply it stopped waiting for, which is
// harmless: renewals are owner-checked and never touch a completed or newer claim), and ends Context
// with context.Canceled unless the claim had already ended. It sends nothing: the claim stays pending
// until [Store.Complete], [Store.Abandon] or its lease ends. It is idempotent.
func (c *Claim) Stop() {
	c.mu.Lock()
	stop, done := c.stop, c.keepAliveDone
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	c.expiry.Stop()
	c.end(context.Canceled)
}

// Context is cancelled, with Err as its cause, when the claim ends: derive the work's context from it.
func (c *Claim) Context() context.Context { return c.ctx }

// Done is closed when the claim ends ([ErrLost], [ErrExpired], a terminal renewal error, or Stop).
func (c *Claim) Done() <-chan struct{} { return c.ctx.Done() }

// Err is nil while the claim is vouched for, then why it ended (context.Canceled after Stop).
func (c *Claim) Err() error {
	if c.ctx.Err() == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// keepAlive renews until ctx ends (Stop, the caller's ctx, or the claim's end) or the claim can no
// longer be vouched for, which it reports through c.end.
func (c *Claim) keepAlive(ctx context.Context) {
	s, ms := c.s, c.ms
	lease := time.Duration(ms) * time.Millisecond
	retry := max(min(max(lease/3, time.Millisecond)/4, s.cfg.own.RetryDelay), time.Millisecond)
	c.mu.Lock()
	deadline := c.deadline
	c.mu.Unlock()
	// Renewals follow the estimate, as every owner-token hold's (ownership.RenewalDue): a keep-alive
	// started late renews at once.
	next := time.NewTimer(ownership.RenewalDue(deadline, lease, 1.0/3))
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		// Bounded by the estimate and by stop; sent without a socket deadline so that giving up on
		// the reply keeps the shared connection.
		rctx, cancel := context.WithDeadline(ctx, deadline)
		ectx, stopDL := luakit.WithoutDeadline(rctx)
		start := time.Now()
		held, admitted, err := s.renew(ectx, c.k, c.secret, c.gen, ms)
		stopDL()
		cancel()
		switch {
		case err == nil && !held:
			c.end(ErrLost)
			return
		case err == nil && !time.Now().Before(deadline):
			// Confirmed too late: a duplicate may have started meanwhile.
			c.end(ErrExpired)
			return
		case err == nil:
			deadline = estimate(start, ms)
			c.mu.Lock()
			c.deadline = deadline
			if c.ctx.Err() == nil {
				c.expiry.Reset(time.Until(deadline))
			}
			c.mu.Unlock()
			next.Reset(ownership.RenewalDue(deadline, lease, 1.0/3))
		default:
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrForeignData) {
				c.end(ErrLost) // someone overwrote the key: the claim is gone
				return
			}
			if admitted && luakit.IsTerminal(err) && !errors.Is(err, ErrUncertain) {
				// Refused by the server (NOPERM...): no retry can succeed, so end with that error
				// instead of retrying until the estimate elapses (as ownership's keep-alive does).
				c.end(err)
				return
			}
			next.Reset(retry)
		}
	}
}

// renew is one keep-alive renewal, admitted as its own IDEMPOTENCY EXTEND with the keep-alive's
// context. A rejection is returned as the renewal's error with admitted false: it is no answer of the
// server, whatever its class, so it is retried.
func (s *Store) renew(ctx context.Context, k, secret, gen string, ms int64) (held, admitted bool, err error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opExtend))
	if err != nil {
		return false, false, err
	}
	held, err = s.extend(ctx, k, secret, gen, ms)
	sc.End(err)
	return held, true, err
}

package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Lock is a lock acquired by [Group.TryAcquire] or [Group.Acquire]: a random owner token held, with
// the lock's TTL, by at least a majority of the group's nodes.
//
// Ownership is a local estimate: the handle reports the lock as held ([Lock.Remaining] > 0, Done open)
// until the validity computed at acquisition or at the last confirmed renewal elapses, a renewal fails,
// or Release or Close is called. That estimate is local timing and proves nothing by itself (see the
// package documentation's non-guarantees). Renew and Release are serialised on one handle. A Lock is
// safe for concurrent use by multiple goroutines; it owns no goroutine (a runtime timer closes Done).
type Lock struct {
	g     *Group
	key   string // logical key as the caller gave it
	pkey  string // physical key
	token string
	fence int64
	ttl   time.Duration
	drift time.Duration

	op    chan struct{} // a one-slot semaphore serialising Renew and Release
	prior inflight      // node goroutines of earlier steps that may still be running; guarded by op

	mu       sync.Mutex
	deadline time.Time // validity deadline (monotonic clock reading)
	timer    *time.Timer
	released bool // a Release was confirmed by a quorum
	ctx      context.Context
	cancel   context.CancelCauseFunc
}

func newLock(g *Group, key, pkey, token string, fence int64, ttl, drift time.Duration, start time.Time, prior inflight) *Lock {
	l := &Lock{g: g, key: key, pkey: pkey, token: token, fence: fence, ttl: ttl, drift: drift, op: make(chan struct{}, 1), prior: prior}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.mu.Lock()
	l.deadline = start.Add(ttl - drift)
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	return l
}

// expire runs on the validity timer: it ends the handle unless a renewal moved the deadline.
func (l *Lock) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.timer.Reset(d)
		return
	}
	l.cancel(ErrExpired)
}

// end stops reporting ownership with cause (the first cause wins). Callers hold l.mu.
func (l *Lock) endLocked(cause error) {
	l.timer.Stop()
	l.cancel(cause)
}

// Key returns the lock key as given to TryAcquire (without the key prefix).
func (l *Lock) Key() string { return l.key }

// TTL returns the TTL sent to the nodes (the requested TTL truncated to whole milliseconds).
func (l *Lock) TTL() time.Duration { return l.ttl }

// FencingToken returns the lock's fencing token in fenced mode ([WithFencing]): a positive int64, equal
// across renewals. Without fencing it returns 0. See the package documentation for what the token does
// and does not guarantee.
func (l *Lock) FencingToken() int64 { return l.fence }

// Remaining returns the local estimate of the validity left: the deadline (acquisition or last
// confirmed renewal start + TTL − drift allowance) minus now, and 0 once the handle ended (expired,
// lost, released). It is local timing and does not prove ownership. It never blocks.
func (l *Lock) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return 0
	}
	return max(0, time.Until(l.deadline))
}

// Deadline returns the validity deadline of the local estimate (see [Lock.Remaining]). It does not
// change when the handle ends.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel closed when the handle stops reporting ownership: the validity estimate
// elapsed ([ErrExpired]), a renewal was not confirmed ([ErrLost]), or Release / Close was called
// ([ErrReleased]). [Lock.Err] then says which.
func (l *Lock) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the handle reports ownership, and afterwards the cause: [ErrExpired],
// [ErrLost] or [ErrReleased].
func (l *Lock) Err() error { return context.Cause(l.ctx) }

// Context returns a context cancelled when Done closes, with [Lock.Err] as its cause (see
// context.Cause). Derive the protected work's context from it.
func (l *Lock) Context() context.Context { return l.ctx }

// acquireOp waits for the handle's operation slot (serialising Renew and Release) or ctx.
func (l *Lock) acquireOp(ctx context.Context, op string) error {
	select {
	case l.op <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("redlock: %s: waiting for a concurrent operation: %w", op, ctx.Err())
	}
}

func (l *Lock) releaseOp() { <-l.op }

// Renew resets the lock's TTL on every node where this owner still holds it (one owner-checked script
// per node, in parallel, each bounded by the node timeout and by ctx) and returns true when a majority
// confirmed and validity is left: the new deadline is the renewal's start + TTL − drift allowance.
//
// A renewal that no quorum confirms (node failures, timeouts, ctx cancellation) or that leaves no
// validity ends the lease: the handle ends with [ErrLost], an owner-checked delete is sent to every node
// (best-effort, bounded by the node timeout even when ctx is cancelled), and Renew returns false with a
// [*QuorumError] (Op "renew") or an error wrapping [ErrNoValidity]. Acquire again to continue.
//
// On a handle that already ended (expired, lost, released) Renew does no I/O and returns false with
// [Lock.Err]. It waits for a concurrent Release or Renew on the same handle first; a ctx that ends
// while waiting returns false with an error wrapping ctx.Err() and leaves the handle unchanged.
// The fencing token is unchanged by renewal.
func (l *Lock) Renew(ctx context.Context) (bool, error) {
	if err := l.acquireOp(ctx, "renew"); err != nil {
		return false, err
	}
	defer l.releaseOp()
	if err := l.Err(); err != nil {
		return false, err
	}
	g := l.g
	keys, args := []string{l.pkey}, []string{l.token, luakit.FormatInt64(l.ttl.Milliseconds())}
	start := time.Now()
	res, settled := g.fanout(ctx, nil, l.prior, func(ctx context.Context, i int) rueidis.RedisResult {
		return extendScript.ExecOrdered(ctx, g.clients[i], keys, args)
	})
	l.prior = l.prior.with(settled)
	confirmed := 0
	var fails []NodeError
	for i, r := range res {
		if err := decodeExtend(r.msg, r.err); err != nil {
			fails = append(fails, g.nodeError(i, err))
			continue
		}
		confirmed++
	}
	var failure error
	elapsed := time.Since(start)
	switch {
	case confirmed < g.quorum:
		failure = &QuorumError{Op: "renew", Needed: g.quorum, Got: confirmed, Nodes: fails}
	case l.ttl-elapsed-l.drift <= 0:
		failure = fmt.Errorf("redlock: renew: %w (ttl %v, elapsed %v, drift allowance %v)", ErrNoValidity, l.ttl, elapsed, l.drift)
	}
	l.mu.Lock()
	if failure == nil {
		if err := l.Err(); err != nil {
			// The validity ran out while the renewal was in flight: too late to count.
			failure = err
		} else {
			l.deadline = start.Add(l.ttl - l.drift)
			l.timer.Reset(time.Until(l.deadline))
			l.mu.Unlock()
			return true, nil
		}
	}
	l.endLocked(ErrLost)
	l.mu.Unlock()
	l.prior = g.cleanup(ctx, "renew", l.pkey, l.token, l.prior)
	return false, failure
}

// Release deletes the lock (owner-checked, one script per node) on every node in parallel, each bounded
// by the node timeout, and returns true when a quorum of nodes replied.
//
// A node replied when its script returned a reply: it deleted this owner's token, found no lock, or
// found another owner's lock (which it leaves alone). In every case this owner's token is no longer on
// that node afterwards. Errors, timeouts and unreachable nodes are not replies. True therefore means a
// majority is known to be free of this owner's token; a minority that did not reply keeps it until its
// TTL ends.
//
// Release ends the handle's ownership ([ErrReleased]) whatever the outcome. On false (a
// [*QuorumError], Op "release", listing the nodes that did not reply) the handle keeps its token, so
// calling Release again retries on every node. After a true result, further calls return true without
// I/O.
//
// ctx bounds only the wait for a concurrent Renew or Release on the same handle: if it ends first,
// Release returns false with an error wrapping ctx.Err() and changes nothing. Once sent, the deletes
// run to completion or the node timeout even when ctx is cancelled, so Release blocks for at most
// about one node timeout after it starts.
func (l *Lock) Release(ctx context.Context) (bool, error) {
	if err := l.acquireOp(ctx, "release"); err != nil {
		return false, err
	}
	defer l.releaseOp()
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return true, nil
	}
	l.endLocked(ErrReleased)
	l.mu.Unlock()

	g := l.g
	keys, args := []string{l.pkey}, []string{l.token}
	res, settled := g.fanout(context.WithoutCancel(ctx), nil, l.prior, func(ctx context.Context, i int) rueidis.RedisResult {
		return releaseScript.ExecOrdered(ctx, g.clients[i], keys, args)
	})
	l.prior = l.prior.with(settled)
	replied := 0
	var fails []NodeError
	for i, r := range res {
		if _, err := decodeRelease(r.msg, r.err); err != nil {
			fails = append(fails, g.nodeError(i, err))
			continue
		}
		replied++
	}
	if replied < g.quorum {
		return false, &QuorumError{Op: "release", Needed: g.quorum, Got: replied, Nodes: fails}
	}
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	return true, nil
}

// Close makes one best-effort release attempt (as [Lock.Release] with a background context) unless a
// Release already succeeded, and returns its error: nil when a quorum replied. It blocks for at most
// about one node timeout (plus a concurrent Renew). The handle ends with [ErrReleased] either way.
func (l *Lock) Close() error {
	_, err := l.Release(context.Background())
	return err
}

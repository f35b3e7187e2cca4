package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// queue is a Limiter's local wait queue, guarded by Limiter.mu. Waiters are kept in arrival order
// (oldest first); the head served next is the first (OldestFirst) or the last (NewestFirst). One pump
// goroutine, started when the first waiter arrives and ending when the queue is empty, serves the
// head: it sleeps until the head's retry time (from the server's RetryAfter) and then makes one
// attempt for it.
type queue struct {
	ws      []*waiter
	permits int64         // sum of n over ws
	running bool          // the pump goroutine is running
	wake    chan struct{} // capacity 1: tells the pump to re-examine the head
}

type waiter struct {
	ctx      context.Context
	n        int64
	due      time.Time // the next attempt may run from then
	last     Result    // the latest rejection (zero before the first attempt)
	done     chan outcome
	queued   bool // still in the queue
	inflight bool // the pump is attempting it
	// sent: the pump's current attempt passed the update barrier and may have sent its script, so
	// ending the waiter now leaves an uncertain outcome (set by Limiter.enter, guarded by Limiter.mu).
	sent bool
	// used: the settings the pump's current attempt decides with (set when the attempt starts and
	// again by Limiter.enter). A rejection decided with settings an Update has since replaced is
	// stale: the waiter retries at once instead of sleeping on its RetryAfter.
	used *compiled
}

type outcome struct {
	res Result
	err error
}

// wait is WaitN with a queue, after begin.
func (l *Limiter) wait(ctx context.Context, n int64) (Result, error) {
	// A denied identity never enters the queue.
	if res, denied, err := l.denied(ctx); err != nil || denied {
		return res, err
	}
	l.mu.Lock()
	capacity := l.cur.capacity()
	empty := len(l.q.ws) == 0
	l.mu.Unlock()

	var res Result
	attempted := false
	if empty || n > l.queueLimit || n > capacity {
		r, err := l.attempt(ctx, n, false, nil)
		if err != nil {
			return Result{}, err
		}
		if r.Allowed || r.RetryAfter <= 0 || n > l.queueLimit {
			return r, nil
		}
		res, attempted = r, true
	}

	now := time.Now()
	w := &waiter{ctx: ctx, n: n, due: now, done: make(chan outcome, 1)}
	if attempted {
		w.due, w.last = now.Add(res.RetryAfter), res
	}
	l.mu.Lock()
	if l.closed {
		err := l.closeErr
		l.mu.Unlock()
		return Result{}, err
	}
	if !l.makeRoomLocked(n) {
		rej := rejection(w, l.cur.capacity(), now)
		l.mu.Unlock()
		return rej, nil
	}
	w.queued = true
	l.q.ws = append(l.q.ws, w)
	l.q.permits += n
	l.startPumpLocked()
	l.mu.Unlock()

	select {
	case o := <-w.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	if w.queued {
		err := fmt.Errorf("ratelimit: wait: %w", ctx.Err())
		if w.inflight && w.sent {
			// The pump's attempt may already be on the server: it can consume the permits without
			// an admission reaching the caller. The caller does not wait for its reply.
			err = fmt.Errorf("ratelimit: wait: %w: %w", ErrUncertain, ctx.Err())
		}
		l.removeLocked(w)
		l.mu.Unlock()
		return Result{}, err
	}
	l.mu.Unlock()
	o := <-w.done // delivered concurrently with the cancellation
	return o.res, o.err
}

// makeRoomLocked reports whether n more permits fit in the queue, evicting the oldest waiters first
// for NewestFirst. A waiter being attempted is never evicted.
func (l *Limiter) makeRoomLocked(n int64) bool {
	if l.q.permits+n <= l.queueLimit {
		return true
	}
	if l.queueOrder != NewestFirst {
		return false
	}
	// Is there enough to evict?
	evictable := int64(0)
	for _, w := range l.q.ws {
		if l.q.permits-evictable+n <= l.queueLimit {
			break
		}
		if !w.inflight {
			evictable += w.n
		}
	}
	if l.q.permits-evictable+n > l.queueLimit {
		return false
	}
	now := time.Now()
	capacity := l.cur.capacity()
	for l.q.permits+n > l.queueLimit {
		var victim *waiter
		for _, w := range l.q.ws {
			if !w.inflight {
				victim = w
				break
			}
		}
		l.removeLocked(victim)
		victim.done <- outcome{res: rejection(victim, capacity, now)}
	}
	return true
}

// rejection is the result for a request that leaves the queue (or never enters it) without being
// admitted: its latest rejection, with RetryAfter counted down to now.
func rejection(w *waiter, capacity int64, now time.Time) Result {
	r := w.last
	if r.Reason == ReasonNone {
		r = Result{Reason: ReasonCapacity, Limit: capacity}
	}
	r.Allowed = false
	r.RetryAfter = 0
	if d := w.due.Sub(now); d > 0 && w.last.RetryAfter > 0 {
		r.RetryAfter = d
	}
	return r
}

// removeLocked takes w out of the queue.
func (l *Limiter) removeLocked(w *waiter) {
	for i, x := range l.q.ws {
		if x == w {
			copy(l.q.ws[i:], l.q.ws[i+1:])
			l.q.ws[len(l.q.ws)-1] = nil
			l.q.ws = l.q.ws[:len(l.q.ws)-1]
			break
		}
	}
	w.queued = false
	l.q.permits -= w.n
	l.signalLocked()
}

func (l *Limiter) signalLocked() {
	if l.q.wake == nil {
		return
	}
	select {
	case l.q.wake <- struct{}{}:
	default:
	}
}

func (l *Limiter) startPumpLocked() {
	if l.q.running {
		l.signalLocked()
		return
	}
	if l.q.wake == nil {
		l.q.wake = make(chan struct{}, 1)
	}
	l.q.running = true
	l.pumpWG.Add(1)
	go l.pump()
}

func (l *Limiter) headLocked() *waiter {
	if l.queueOrder == NewestFirst {
		return l.q.ws[len(l.q.ws)-1]
	}
	return l.q.ws[0]
}

// pump serves the head of the queue until the queue is empty or the limiter closes.
func (l *Limiter) pump() {
	defer l.pumpWG.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		if l.closed || len(l.q.ws) == 0 {
			l.q.running = false
			l.mu.Unlock()
			return
		}
		w := l.headLocked()
		if d := time.Until(w.due); d > 0 {
			l.mu.Unlock()
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-l.q.wake:
			case <-l.closeCtx.Done():
			}
			timer.Stop()
			continue
		}
		w.inflight, w.sent, w.used = true, false, l.cur
		l.mu.Unlock()

		// The attempt ends with the waiter's context or with Close, whichever comes first.
		actx, cancel := context.WithCancel(w.ctx)
		stop := context.AfterFunc(l.closeCtx, cancel)
		res, err := l.attempt(actx, w.n, true, w)
		stop()
		cancel()

		l.mu.Lock()
		w.inflight = false
		if w.queued { // not cancelled, evicted or failed by Close meanwhile
			l.settleLocked(w, res, err)
		}
		l.mu.Unlock()
	}
}

// settleLocked applies the outcome of the pump's attempt for w, still queued: an error, an admission,
// a deny-list rejection or a rejection without RetryAfter (which includes one whose Limit, the
// capacity of the settings the server applied, is below w.n: compiled.run gives it none) ends the
// wait. A rejection decided with
// settings that an Update replaced while the attempt ran (its wake-up found the waiter in flight and
// left it alone) is handled as that wake-up would have: the waiter leaves without RetryAfter when it is
// larger than the new capacity and otherwise retries at once. Any other rejection sleeps until its
// RetryAfter.
func (l *Limiter) settleLocked(w *waiter, res Result, err error) {
	now := time.Now()
	switch {
	case err != nil || res.Allowed || res.Reason == ReasonDenyList:
	case w.used != l.cur:
		if capacity := l.cur.capacity(); w.n > capacity {
			res = Result{Reason: ReasonCapacity, Limit: capacity}
			break
		}
		w.due, w.last = now, res
		return
	case res.RetryAfter > 0:
		w.due, w.last = now.Add(res.RetryAfter), res
		return
	}
	l.removeLocked(w)
	w.done <- outcome{res: res, err: err}
}

// wakeQueueLocked runs after an Update published settings of the given capacity: requests larger
// than it are rejected without RetryAfter, and every other one may retry now, in order. A waiter the
// pump is attempting is left to the pump (see settleLocked): its attempt may already have been
// admitted under the old settings.
func (l *Limiter) wakeQueueLocked(capacity int64) {
	if len(l.q.ws) == 0 {
		return
	}
	now := time.Now()
	for _, w := range append([]*waiter(nil), l.q.ws...) {
		if w.inflight {
			continue
		}
		if w.n > capacity {
			l.removeLocked(w)
			w.done <- outcome{res: Result{Reason: ReasonCapacity, Limit: capacity}}
			continue
		}
		w.due = now
	}
	l.signalLocked()
}

// failQueueLocked fails every waiter with err (Close, or a failed migration).
// A waiter whose attempt may be on the server gets err also wrapping ErrUncertain.
func (l *Limiter) failQueueLocked(err error) {
	for _, w := range l.q.ws {
		w.queued = false
		if w.inflight && w.sent {
			w.done <- outcome{err: fmt.Errorf("%w: %w", err, ErrUncertain)}
			continue
		}
		w.done <- outcome{err: err}
	}
	clear(l.q.ws)
	l.q.ws = l.q.ws[:0]
	l.q.permits = 0
	l.signalLocked()
}

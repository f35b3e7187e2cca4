package lock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// ReleaseOutcome is the result of [Lease.Release].
type ReleaseOutcome int

const (
	// Released: this call deleted this owner's lease.
	Released ReleaseOutcome = iota + 1
	// AlreadyReleased: an earlier Release on this handle already ended the lease (or, after an uncertain
	// earlier attempt, the lease is gone); nothing was deleted now.
	AlreadyReleased
	// NotOwned: the server holds no lease of this owner: it expired, possibly was taken by another owner
	// (whose lease is left intact), or was deleted externally.
	NotOwned
)

// String returns "released", "already_released" or "not_owned".
func (o ReleaseOutcome) String() string {
	switch o {
	case Released:
		return "released"
	case AlreadyReleased:
		return "already_released"
	case NotOwned:
		return "not_owned"
	}
	return "ReleaseOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Lease is a held fenced lease: the owner token that guards renewal and release, and the fencing token
// that the protected resource must check. Its methods are safe for concurrent use.
//
// The handle tracks a local estimate of the lease's life, measured from before the acquiring (or last
// renewing) request was sent, so it never outlives the server's lease on a correct clock. [Lease.Done]
// and [Lease.Context] end when that estimate elapses, when the server reports the lease lost, or on
// [Lease.Release]: stop protected work then.
type Lease struct {
	l                  *Locker
	keys               keys
	leaseKey, fenceKey string
	owner              string
	token              int64
	ttl                time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu            sync.Mutex
	deadline      time.Time
	timer         *time.Timer
	released      bool // Release returned Released/AlreadyReleased/NotOwned
	releaseSent   bool // a release may have reached the server
	keepAliveStop context.CancelFunc
	keepAliveDone chan struct{}

	releaseMu sync.Mutex // serialises Release calls, so concurrent callers agree on the outcome
}

func newLease(l *Locker, k keys, leaseKey, fenceKey, owner string, token int64, ttl time.Duration, deadline time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Lease{
		l: l, keys: k, leaseKey: leaseKey, fenceKey: fenceKey, owner: owner, token: token, ttl: ttl,
		ctx: ctx, cancel: cancel, deadline: deadline,
	}
	h.mu.Lock() // expire runs on the timer's goroutine and reads h.timer under h.mu
	h.timer = time.AfterFunc(time.Until(deadline), h.expire)
	h.mu.Unlock()
	return h
}

// expire runs when the local estimate may have elapsed; a renewal can have moved the deadline.
func (h *Lease) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return
	}
	if d := time.Until(h.deadline); d > 0 {
		h.timer.Reset(d)
		return
	}
	h.endLocked(ErrExpired)
}

// endLocked ends the handle with cause; h.mu must be held.
func (h *Lease) endLocked(cause error) {
	if h.ctx.Err() == nil {
		h.cancel(cause)
	}
	h.timer.Stop()
}

// FencingToken returns the positive fencing token issued for this lease (exact for every int64). Send it
// with every protected write; the resource must reject tokens lower than the highest it has accepted.
func (h *Lease) FencingToken() int64 { return h.token }

// OwnerToken returns the random 128-bit owner token (32 hex characters) that guards renewal and release.
// Keep it private: never log it or use it as a metric attribute.
func (h *Lease) OwnerToken() string { return h.owner }

// LeaseKey returns the lease key as given to the Locker (without the key prefix).
func (h *Lease) LeaseKey() string { return h.leaseKey }

// FenceKey returns the fence (counter) key as given to the Locker (without the key prefix).
func (h *Lease) FenceKey() string { return h.fenceKey }

// TTL returns the lease duration, truncated to whole milliseconds.
func (h *Lease) TTL() time.Duration { return h.ttl }

// Deadline returns the local estimate of when the lease ends: the send time of the acquiring or last
// successful renewing request plus the TTL.
func (h *Lease) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// Remaining returns the local estimate of the lease's remaining life; zero once it elapsed, the lease
// was lost or released.
func (h *Lease) Remaining() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return 0
	}
	return max(0, time.Until(h.deadline))
}

// Done returns a channel closed when the handle stops vouching for ownership: the local estimate
// elapsed, the server reported the lease lost, or Release was called. [Lease.Err] says which.
func (h *Lease) Done() <-chan struct{} { return h.ctx.Done() }

// Context returns a context cancelled when [Lease.Done] closes; context.Cause gives the reason
// ([ErrExpired], [ErrLost] or [ErrReleased]). Derive the protected work's context from it.
func (h *Lease) Context() context.Context { return h.ctx }

// Err returns nil while the handle vouches for ownership, then [ErrExpired], [ErrLost] or [ErrReleased].
func (h *Lease) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// Extend restarts the lease's expiry at the full TTL, only if this owner still holds it. The fencing
// token is unchanged.
//
// It returns (true, nil) when renewed (the local estimate moves to send time + TTL), and (false, nil)
// when the lease is no longer this owner's: then the handle ends with [ErrLost]. After the local estimate
// elapsed (or after Release) it returns (false, nil) without contacting the server. When the outcome is
// uncertain (ctx ended or the connection broke after sending) it returns false and an error wrapping
// [ErrUncertain]; the handle keeps its previous estimate, which stays a safe lower bound because a
// renewal can only lengthen the lease. Other errors leave the handle unchanged.
func (h *Lease) Extend(ctx context.Context) (bool, error) {
	h.mu.Lock()
	if h.ctx.Err() != nil || !time.Now().Before(h.deadline) {
		h.mu.Unlock()
		return false, nil
	}
	h.mu.Unlock()

	start := time.Now()
	n, err := extendScript.Exec(ctx, h.l.client, []string{h.keys.lease},
		[]string{h.owner, strconv.FormatInt(h.ttl.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("%w: extend: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("lock: extend: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n != 1 {
		h.endLocked(ErrLost)
		return false, nil
	}
	if h.ctx.Err() != nil {
		// Released or expired while the renewal was in flight; the server-side renewal happened, but
		// this handle no longer vouches for ownership.
		return true, nil
	}
	if d := start.Add(h.ttl); d.After(h.deadline) {
		h.deadline = d
		h.timer.Reset(time.Until(d))
	}
	return true, nil
}

// Verify asks the server whether this owner holds the lease at this instant; it cannot vouch for any
// later moment. It returns (true, nil) when held, and (false, nil) when not, ending the handle with
// [ErrLost]. A failed or uncertain verification returns the error and leaves the handle unchanged.
// Verify does not renew the lease.
func (h *Lease) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.Exec(ctx, h.l.client, []string{h.keys.lease}, []string{h.owner}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("%w: verify: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("lock: verify: %w", err)
	}
	if n == -2 {
		h.mu.Lock()
		h.endLocked(ErrLost)
		h.mu.Unlock()
		return false, nil
	}
	return true, nil
}

// Release deletes the lease if this owner still holds it; another owner's lease is never touched, and
// the counter never changes. It stops a running keep-alive and ends the handle with [ErrReleased]
// whatever the outcome.
//
// Outcomes: [Released] when this call deleted the lease; [AlreadyReleased] when an earlier Release on
// this handle settled it (no I/O), or when the lease is absent after an earlier uncertain attempt;
// [NotOwned] when the lease expired, was deleted, or belongs to another owner. When the outcome is
// uncertain it returns an error wrapping [ErrUncertain]; call Release again to settle it (the lease
// otherwise expires after its TTL). Concurrent Release calls on one handle run one at a time: exactly one
// of them reports the outcome of the deletion, the others AlreadyReleased.
func (h *Lease) Release(ctx context.Context) (ReleaseOutcome, error) {
	h.releaseMu.Lock()
	defer h.releaseMu.Unlock()
	h.stopKeepAlive()
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return AlreadyReleased, nil
	}
	retry := h.releaseSent
	h.releaseSent = true
	h.endLocked(ErrReleased)
	h.mu.Unlock()

	n, err := releaseScript.Exec(ctx, h.l.client, []string{h.keys.lease}, []string{h.owner}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return 0, fmt.Errorf("%w: release: %w", ErrUncertain, err)
		}
		return 0, fmt.Errorf("lock: release: %w", err)
	}
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
	switch n {
	case 1:
		return Released, nil
	case 0:
		if retry {
			return AlreadyReleased, nil
		}
		return NotOwned, nil
	default:
		return NotOwned, nil
	}
}

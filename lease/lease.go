package lease

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
	// Released: this call deleted this owner's field.
	Released ReleaseOutcome = iota + 1
	// AlreadyReleased: an earlier Release on this handle already ended the lease (or, after an uncertain
	// earlier attempt, the field is gone); nothing was deleted now.
	AlreadyReleased
	// NotOwned: the server holds no lease of this owner in the field: it expired, possibly was taken by
	// another owner (whose lease is left intact), or was deleted externally.
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

// Lease is a held named lease: one field of a hash, holding this handle's random owner token, which
// guards renewal, verification and release. Its methods are safe for concurrent use.
//
// The handle tracks a local estimate of the lease's life, measured from before the acquiring (or last
// renewing) request was sent, so on a sane clock it never outlives the server's field. [Lease.Done] and
// [Lease.Context] end when that estimate elapses, when the server reports the lease lost, when a renewal
// or release outcome is uncertain, or on [Lease.Release]: stop protected work then.
//
// There is no keep-alive: renew explicitly with [Lease.Extend] before the estimate elapses.
type Lease struct {
	ls      *Leases
	key     string // physical hash key
	hashKey string
	field   string
	owner   string
	ttl     time.Duration

	mu          sync.Mutex
	ctx         context.Context // the current period of vouched ownership
	cancel      context.CancelCauseFunc
	deadline    time.Time
	timer       *time.Timer
	final       error // ErrLost, ErrUncertain or ErrReleased: the handle never vouches again
	released    bool  // Release returned an outcome
	releaseSent bool  // a release may have reached the server
}

func newLease(ls *Leases, key, hashKey, field, owner string, ttl time.Duration, deadline time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Lease{
		ls: ls, key: key, hashKey: hashKey, field: field, owner: owner, ttl: ttl,
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
	h.cancel(ErrExpired)
}

// endLocked ends the handle for good with cause (ErrLost, ErrUncertain or ErrReleased); h.mu must be
// held. The first final cause wins.
func (h *Lease) endLocked(cause error) {
	if h.final == nil {
		h.final = cause
	}
	if h.ctx.Err() == nil {
		h.cancel(h.final)
	}
	h.timer.Stop()
}

// HashKey returns the hash key as given to the Leases (without the key prefix).
func (h *Lease) HashKey() string { return h.hashKey }

// Field returns the field (the lease name).
func (h *Lease) Field() string { return h.field }

// OwnerToken returns the random 128-bit owner token (32 hex characters) stored as the field's value; it
// guards renewal, verification and release. Keep it private: never log it or use it as a metric
// attribute.
func (h *Lease) OwnerToken() string { return h.owner }

// TTL returns the lease duration, truncated to whole milliseconds.
func (h *Lease) TTL() time.Duration { return h.ttl }

// Deadline returns the local estimate of when the lease ends: the send time of the acquiring or last
// successful renewing request plus the TTL.
func (h *Lease) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// Remaining returns the local estimate of the lease's remaining life; zero once it elapsed, or once the
// lease was lost, released or became uncertain.
func (h *Lease) Remaining() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return 0
	}
	return max(0, time.Until(h.deadline))
}

// Done returns a channel closed when the handle stops vouching for ownership: the local estimate
// elapsed, the server reported the lease lost, a renewal or release outcome was uncertain, or Release
// was called. [Lease.Err] says which.
//
// A channel closed because the estimate elapsed stays closed; if a later [Lease.Extend] finds the field
// still held and renews it, Done and Context return a fresh channel and context for the new period.
func (h *Lease) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctx.Done()
}

// Context returns a context cancelled when [Lease.Done] closes; context.Cause gives the reason
// ([ErrExpired], [ErrLost], [ErrUncertain] or [ErrReleased]). Derive the protected work's context from
// it.
func (h *Lease) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctx
}

// Err returns nil while the handle vouches for ownership, then [ErrExpired], [ErrLost], [ErrUncertain]
// or [ErrReleased]. Once the handle ended for good (lost, uncertain or released) Err reports that first
// final reason, even when the context had already ended on [ErrExpired].
func (h *Lease) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() == nil {
		return nil
	}
	if h.final != nil {
		return h.final
	}
	return context.Cause(h.ctx)
}

// Extend restarts the field's expiry at the full TTL, only if this owner still holds it.
//
// Unlike a fenced lock, a hash-field renewal checks the owner field in Redis, so it can return true after
// the local estimate elapsed, as long as the field still exists with this owner's token. The local
// estimate then moves to send time + TTL and, if the handle had ended on [ErrExpired], a fresh
// [Lease.Context] starts (contexts taken before stay cancelled).
//
// It returns (true, nil) when renewed, and (false, nil) when the field is no longer this owner's: the
// handle then ends with [ErrLost]. It returns (false, nil) without contacting the server once the handle
// ended with [ErrLost], [ErrReleased] or [ErrUncertain]. When the outcome is uncertain (ctx ended or the
// connection broke after sending) it returns false and an error wrapping [ErrUncertain], and the handle
// fails closed: it ends with ErrUncertain and every later Extend returns false, because the earlier
// renewal may still run. Only an owner-checked [Lease.Release] (or [Lease.Verify]) can then settle
// ownership. Other errors leave the handle unchanged. It blocks for one round trip.
func (h *Lease) Extend(ctx context.Context) (bool, error) {
	h.mu.Lock()
	if h.final != nil {
		h.mu.Unlock()
		return false, nil
	}
	h.mu.Unlock()

	start := time.Now()
	n, err := extendScript.Exec(ctx, h.ls.client, []string{h.key},
		[]string{h.field, h.owner, strconv.FormatInt(h.ttl.Milliseconds(), 10)}).AsInt64()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if luakit.IsUncertain(err) {
			h.endLocked(ErrUncertain)
			return false, fmt.Errorf("%w: extend: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("lease: extend: %w", err)
	}
	if n != 1 {
		h.endLocked(ErrLost)
		return false, nil
	}
	if h.final != nil {
		// Released, lost or uncertain while the renewal was in flight: the server-side renewal happened,
		// but this handle no longer vouches for ownership.
		return true, nil
	}
	d := start.Add(h.ttl)
	if !d.After(h.deadline) {
		return true, nil
	}
	h.deadline = d
	if h.ctx.Err() != nil {
		// The estimate had elapsed but the server still held the field for this owner: a new period.
		if time.Until(d) <= 0 {
			return true, nil
		}
		h.ctx, h.cancel = context.WithCancelCause(context.Background())
	}
	h.timer.Reset(time.Until(d))
	return true, nil
}

// Verify asks the server whether this owner holds the field at this instant; it cannot vouch for any
// later moment and does not renew. It returns (true, nil) when held, and (false, nil) when not, ending
// the handle with [ErrLost]. A failed or uncertain verification returns the error (wrapping
// [ErrUncertain] when uncertain) and leaves the handle unchanged. It blocks for one round trip.
func (h *Lease) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.Exec(ctx, h.ls.client, []string{h.key}, []string{h.field, h.owner}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("%w: verify: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("lease: verify: %w", err)
	}
	if n == -2 {
		h.mu.Lock()
		h.endLocked(ErrLost)
		h.mu.Unlock()
		return false, nil
	}
	return true, nil
}

// Release deletes the field if this owner still holds it; another owner's lease and other fields are
// never touched. It ends the handle with [ErrReleased] whatever the outcome (Extend then returns false).
//
// Outcomes: [Released] when this call deleted the field; [AlreadyReleased] when an earlier Release on
// this handle settled it (no I/O), or when the field is absent after an earlier uncertain attempt;
// [NotOwned] when the field expired, was deleted, or belongs to another owner. When the outcome is
// uncertain it returns an error wrapping [ErrUncertain]; Release may always be called again, and an
// answered owner-checked release settles ownership (the field otherwise expires after its TTL). It blocks
// for one round trip (none when already released).
func (h *Lease) Release(ctx context.Context) (ReleaseOutcome, error) {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return AlreadyReleased, nil
	}
	retry := h.releaseSent
	h.releaseSent = true
	h.endLocked(ErrReleased)
	h.mu.Unlock()

	n, err := releaseScript.Exec(ctx, h.ls.client, []string{h.key}, []string{h.field, h.owner}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return 0, fmt.Errorf("%w: release: %w", ErrUncertain, err)
		}
		return 0, fmt.Errorf("lease: release: %w", err)
	}
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
	switch {
	case n == 1:
		return Released, nil
	case n == 0 && retry:
		return AlreadyReleased, nil
	default:
		return NotOwned, nil
	}
}

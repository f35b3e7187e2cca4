package rwlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// ReleaseOutcome is the result of [Lease.Release].
type ReleaseOutcome int

const (
	// Released: this call removed this owner's entry.
	Released ReleaseOutcome = iota + 1
	// AlreadyReleased: an earlier Release or Close on this handle already settled the entry (or, after
	// an uncertain earlier attempt, the entry is gone); nothing was removed now.
	AlreadyReleased
	// NotOwned: the server holds no unexpired entry of this owner: it expired (possibly followed by
	// other holders, whose entries are left intact) or was deleted externally.
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

// Lease is a held read or write lease: one holder entry, guarded by a random owner token, in the key's
// sorted set. Its methods are safe for concurrent use.
//
// The handle tracks a local estimate of the entry's life, measured from before the acquiring (or last
// renewing) request was sent, so on a sane clock it never outlives the server's entry. [Lease.Done] and
// [Lease.Context] end when that estimate elapses ([ErrExpired]), when a renewal fails or is uncertain
// ([ErrLost]), or on Release / Close ([ErrReleased]): stop protected work then.
type Lease struct {
	l        *Locker
	mode     Mode
	key      string // as given, without prefix
	physical string // with prefix
	owner    string
	entry    string // mode tag + ":" + owner: the sorted-set member
	ttl      time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu          sync.Mutex
	deadline    time.Time
	timer       *time.Timer
	released    bool // a Release or Close got an answer
	releaseSent bool // a release may have reached the server
}

func newLease(l *Locker, mode Mode, key, physical, owner, entry string, ttl time.Duration, deadline time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Lease{
		l: l, mode: mode, key: key, physical: physical, owner: owner, entry: entry, ttl: ttl,
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

// endLocked ends the handle with cause (the first cause wins); h.mu must be held.
func (h *Lease) endLocked(cause error) {
	if h.ctx.Err() == nil {
		h.cancel(cause)
	}
	h.timer.Stop()
}

// Mode returns [Read] or [Write].
func (h *Lease) Mode() Mode { return h.mode }

// Key returns the key as given to the Locker (without the key prefix).
func (h *Lease) Key() string { return h.key }

// OwnerToken returns the random 128-bit owner token (32 hex characters) that guards renewal and release.
// The entry in the key's sorted set is "r:" or "w:" followed by it. Keep it private: never log it or use
// it as a metric attribute.
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

// Remaining returns the local estimate of the lease's remaining life; zero once it elapsed, or the
// handle was lost or released.
func (h *Lease) Remaining() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return 0
	}
	return max(0, time.Until(h.deadline))
}

// Done returns a channel closed when the handle stops vouching for the lease: the local estimate
// elapsed, a renewal failed or was uncertain, or Release / Close was called. [Lease.Err] says which.
func (h *Lease) Done() <-chan struct{} { return h.ctx.Done() }

// Context returns a context cancelled when [Lease.Done] closes; context.Cause gives the reason
// ([ErrExpired], [ErrLost] or [ErrReleased]). Derive the protected work's context from it.
func (h *Lease) Context() context.Context { return h.ctx }

// Err returns nil while the handle vouches for the lease, then [ErrExpired], [ErrLost] or [ErrReleased].
func (h *Lease) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(h.ctx)
}

// Extend restarts this entry's expiry at the full TTL, counted on the server, only while the entry
// exists unexpired. Other holders' entries keep their own expiries.
//
// It returns (true, nil) when renewed; the local estimate moves to send time + TTL. It returns
// (false, nil) when the entry is gone (expired or deleted), and then the handle ends with [ErrLost].
// When the outcome is uncertain (ctx ended or the connection broke after sending) it returns false and
// an error wrapping [ErrUncertain], and the handle also ends with [ErrLost] (fail closed: the renewal may
// not have run, and an earlier one may still land); [Lease.Release] can still remove the entry. Once the
// handle has ended (lost, expired or released) it returns (false, nil) without I/O; if it ends while the
// renewal is in flight, the result is (false, nil) too, even though the server renewed. A server error reply
// (the script did not run) returns false and the error and leaves the handle unchanged.
//
// It blocks for one round trip, bounded by ctx.
func (h *Lease) Extend(ctx context.Context) (bool, error) {
	h.mu.Lock()
	if h.ctx.Err() != nil || !time.Now().Before(h.deadline) {
		h.mu.Unlock()
		return false, nil
	}
	h.mu.Unlock()

	start := time.Now()
	n, err := extendScript.Exec(ctx, h.l.client, []string{h.physical},
		[]string{h.entry, strconv.FormatInt(h.ttl.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			h.mu.Lock()
			h.endLocked(ErrLost)
			h.mu.Unlock()
			return false, fmt.Errorf("%w: extend: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("rwlock: extend: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n != 1 {
		h.endLocked(ErrLost)
		return false, nil
	}
	if h.ctx.Err() != nil {
		// Ended (released or expired) while the renewal was in flight: the server renewed the entry,
		// but this handle no longer vouches for it.
		return false, nil
	}
	if d := start.Add(h.ttl); d.After(h.deadline) {
		h.deadline = d
		h.timer.Reset(time.Until(d))
	}
	return true, nil
}

// Verify asks the server whether this entry exists unexpired at this instant; it cannot vouch for any
// later moment and does not renew. It returns (true, nil) when held and (false, nil) when not.
//
// Verify never changes the handle, whatever its result: a failed or uncertain verification returns
// false and an error (wrapping [ErrUncertain] when no reply was read), and a negative one returns
// (false, nil); in every case the handle keeps its estimate, and [Lease.Release] still removes the entry
// if it exists. Treat anything but (true, nil) as "stop protected work".
//
// It blocks for one round trip, bounded by ctx.
func (h *Lease) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.Exec(ctx, h.l.client, []string{h.physical}, []string{h.entry}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("%w: verify: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("rwlock: verify: %w", err)
	}
	return n > 0, nil
}

// Release removes this entry if it exists unexpired; other holders' entries are never touched. It ends
// the handle with [ErrReleased] whatever the outcome.
//
// Outcomes: [Released] when this call removed the entry; [AlreadyReleased] when an earlier Release or
// Close on this handle settled it (no I/O), or when the entry is absent after an earlier uncertain
// attempt; [NotOwned] when the entry expired or was deleted. When the outcome is uncertain it returns an
// error wrapping [ErrUncertain]; call Release again to settle it (the entry otherwise expires after its
// TTL). It blocks for at most one round trip, bounded by ctx.
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

	n, err := releaseScript.Exec(ctx, h.l.client, []string{h.physical}, []string{h.entry}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return 0, fmt.Errorf("%w: release: %w", ErrUncertain, err)
		}
		return 0, fmt.Errorf("rwlock: release: %w", err)
	}
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
	switch {
	case n == 1:
		return Released, nil
	case retry:
		return AlreadyReleased, nil
	default:
		return NotOwned, nil
	}
}

// Close releases the lease best-effort: it sends one owner-checked release bounded by the cleanup
// timeout ([WithCleanupTimeout], default 1s) and ignores its outcome, so it never blocks longer than
// that. It ends the handle with [ErrReleased]; after an answered Release or Close it does nothing.
// Failures are logged at warning level; a later Release still sends an owner-checked release.
//
// An entry that Close misses (server unreachable, timeout) keeps blocking conflicting holders until it
// expires. Call [Lease.Release] when you need to know the entry was removed, and prefer short leases.
func (h *Lease) Close() {
	h.mu.Lock()
	if h.released {
		h.mu.Unlock()
		return
	}
	h.releaseSent = true
	h.endLocked(ErrReleased)
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), h.l.cfg.cleanupTimeout)
	defer cancel()
	if err := releaseScript.Exec(ctx, h.l.client, []string{h.physical}, []string{h.entry}).Error(); err != nil {
		// Not settled: a later Release must still send its owner-checked release rather than report
		// AlreadyReleased while the entry may remain.
		h.l.cfg.logger.Warn("rwlock: best-effort release in Close failed; the entry expires after its TTL",
			slog.String("mode", h.mode.String()), slog.String("error", err.Error()))
		return
	}
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
}

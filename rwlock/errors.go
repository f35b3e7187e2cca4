package rwlock

import "errors"

// Sentinel errors. Compare with errors.Is: some are returned wrapped with detail.
var (
	// ErrNotAcquired is returned by [Locker.TryAcquireRead] when a writer holds the key, and by
	// [Locker.TryAcquireWrite] when any reader or a writer holds it. Nothing was written.
	ErrNotAcquired = errors.New("rwlock: lease is held in a conflicting mode")

	// ErrLateReply is returned when the server granted the lease but its reply arrived after the
	// lease's local estimate had already elapsed, so the entry may have expired and been followed by a
	// conflicting holder. The acquisition is not reported as acquired; an owner-checked release is
	// attempted, and otherwise the entry expires on its own.
	ErrLateReply = errors.New("rwlock: acquisition reply arrived after the lease's local estimate elapsed")

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection). The server state is unknown: an acquisition may have
	// been applied (its entry then expires after its TTL unless the owner-checked cleanup removed it), a
	// renewal may still run, a release may or may not have removed the entry.
	ErrUncertain = errors.New("rwlock: outcome uncertain")

	// ErrInvalidTTL is returned, before any I/O, for a lease TTL shorter than one millisecond.
	ErrInvalidTTL = errors.New("rwlock: lease TTL must be at least 1ms")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("rwlock: nil rueidis client")

	// ErrLost is the cause reported by [Lease.Err] and [Lease.Context] when a renewal found the entry
	// gone (it expired, possibly followed by a conflicting holder, or was deleted) or when a renewal's
	// outcome was uncertain.
	ErrLost = errors.New("rwlock: lease lost")

	// ErrExpired is the cause reported by [Lease.Err] and [Lease.Context] when the lease's local
	// estimate elapsed without a confirmed renewal: the server may already have expired the entry.
	ErrExpired = errors.New("rwlock: lease local estimate elapsed")

	// ErrReleased is the cause reported by [Lease.Err] and [Lease.Context] after [Lease.Release] or
	// [Lease.Close] was called on the handle (whatever its outcome).
	ErrReleased = errors.New("rwlock: lease released")
)

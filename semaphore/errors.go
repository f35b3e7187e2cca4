package semaphore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrNotAcquired is returned by [Semaphore.TryAcquire] when capacity permits are already active.
	// Nothing but the pruning of expired permits was written.
	ErrNotAcquired = errors.New("semaphore: no permit available")

	// ErrCapacityMismatch is wrapped by every [*CapacityMismatchError]: permits are active under a
	// different capacity. Nothing but the pruning of expired permits was written.
	ErrCapacityMismatch = errors.New("semaphore: capacity differs from the active permits' capacity")

	// ErrLateReply is returned by [Semaphore.TryAcquire] when the server granted a permit but the reply
	// arrived after the permit's local estimate had elapsed. The acquisition is not reported as acquired;
	// an owner-token release was attempted (and is retried in the background).
	ErrLateReply = errors.New("semaphore: acquisition reply arrived after the permit's local estimate elapsed")

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): an acquisition may have been applied, a release may or
	// may not have removed the permit.
	ErrUncertain = errors.New("semaphore: outcome uncertain")

	// ErrInvalidTTL is returned, before any I/O, for a negative TTL or a positive TTL shorter than one
	// millisecond. (Zero, [NoExpiry], is valid.)
	ErrInvalidTTL = errors.New("semaphore: permit TTL must be 0 (no expiry) or at least 1ms")

	// ErrInvalidCapacity is returned by [New] for a capacity below 1 or above 2^53 (scores are doubles).
	ErrInvalidCapacity = errors.New("semaphore: capacity must be between 1 and 2^53")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("semaphore: nil rueidis client")

	// ErrShutdown is returned by [Semaphore.TryAcquire] after [Semaphore.Shutdown].
	ErrShutdown = errors.New("semaphore: shut down")

	// ErrLost is the cause reported by [Permit.Err] and [Permit.Context] when the server says this owner
	// no longer holds the permit (it expired, was released elsewhere, or the key was deleted).
	ErrLost = errors.New("semaphore: permit lost")

	// ErrExpired is the cause reported by [Permit.Err] and [Permit.Context] when the permit's local
	// estimate elapsed without a confirmed renewal.
	ErrExpired = errors.New("semaphore: permit local estimate elapsed")

	// ErrSurrendered is the cause reported by [Permit.Err] and [Permit.Context] after an [Permit.Extend]
	// that was sent failed or was uncertain: the handle gave the permit up (see Extend).
	ErrSurrendered = errors.New("semaphore: permit surrendered after a failed renewal")

	// ErrReleased is the cause reported by [Permit.Err] and [Permit.Context] after [Permit.Release] or
	// [Permit.Close] was called (whatever the outcome).
	ErrReleased = errors.New("semaphore: permit released")
)

// CapacityMismatchError reports that permits are active under a different capacity than the one this
// [Semaphore] was built with. It wraps [ErrCapacityMismatch]. Every contender must use the same
// capacity; a new capacity is adopted by the first acquisition once no permit is active.
type CapacityMismatchError struct {
	// Stored is the capacity the active permits were acquired under.
	Stored int64
	// Requested is this Semaphore's capacity.
	Requested int64
}

// Error names both capacities.
func (e *CapacityMismatchError) Error() string {
	return fmt.Sprintf("semaphore: capacity %d requested but permits are active under capacity %d", e.Requested, e.Stored)
}

// Unwrap returns [ErrCapacityMismatch].
func (e *CapacityMismatchError) Unwrap() error { return ErrCapacityMismatch }

package semaphore

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
)

// The ownership errors are luakit's shared values, so errors.Is(err, semaphore.ErrLost) and
// errors.Is(err, luakit.ErrLost) agree whichever primitive returned err; their contract is in package
// github.com/coordkit/coordkit/luakit/ownership. Compare with errors.Is: most are returned wrapped.
var (
	// ErrNotAcquired is returned by [Semaphore.TryAcquire] when capacity permits are already active.
	// Nothing but the pruning of expired permits was written.
	ErrNotAcquired = luakit.ErrNotAcquired

	// ErrLateReply is returned by [Semaphore.TryAcquire] when the server granted a permit but the reply
	// arrived after the permit's local estimate had elapsed. The acquisition is not reported as acquired;
	// an owner-token release was sent (and, if unanswered, is retried in the background).
	// [Semaphore.Acquire] tries again instead.
	ErrLateReply = luakit.ErrLateReply

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): an acquisition may have been applied (its cleanup was
	// sent), a renewal may still run, a release may or may not have removed the permit.
	ErrUncertain = luakit.ErrUncertain

	// ErrLost is the cause reported by Permit.Err and Permit.Context once the server said this owner
	// holds no permit (it expired, was removed, or the key was deleted).
	ErrLost = luakit.ErrLost

	// ErrExpired is the cause reported by Permit.Err and Permit.Context once the permit's local
	// estimate elapsed without a confirmed renewal (also after a renewal answered too late, which
	// surrenders the permit).
	ErrExpired = luakit.ErrExpired

	// ErrReleased is the cause reported by Permit.Err and Permit.Context once Permit.Release or
	// [Permit.Close] sent the release (whatever the outcome).
	ErrReleased = luakit.ErrReleased

	// ErrKeepAliveRunning is returned by Permit.KeepAlive when a keep-alive already runs on the permit.
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning

	// ErrInvalidTTL is wrapped by the error returned, before any I/O, for a negative TTL or a positive
	// TTL shorter than one millisecond. (Zero, [NoExpiry], is valid.)
	ErrInvalidTTL = luakit.ErrInvalidTTL
)

// The semaphore's own errors.
var (
	// ErrCapacityMismatch is wrapped by every [*CapacityMismatchError]: permits are active under a
	// different capacity. Nothing but the pruning of expired permits was written.
	ErrCapacityMismatch = errors.New("semaphore: capacity differs from the active permits' capacity")

	// ErrInvalidCapacity is returned by [New] for a capacity below 1 or above 2^53 (scores are doubles).
	ErrInvalidCapacity = errors.New("semaphore: capacity must be between 1 and 2^53")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("semaphore: nil rueidis client")

	// ErrShutdown is returned by [Semaphore.TryAcquire] and [Semaphore.Acquire] after
	// [Semaphore.Shutdown].
	ErrShutdown = errors.New("semaphore: shut down")
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

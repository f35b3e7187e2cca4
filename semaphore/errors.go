package semaphore

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
)

// The ownership errors are luakit's shared values (semaphore.ErrLost == luakit.ErrLost), so one errors.Is
// check works whichever Coordkit primitive returned the error. What each means for every handle is
// the contract in package github.com/coordkit/coordkit/luakit/ownership; the comments say what it
// means here. Most are returned wrapped with a "semaphore: " prefix and detail.
var (
	ErrNoPermission     = luakit.ErrNoPermission     // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrNotAcquired      = luakit.ErrNotAcquired      // TryAcquire: capacity permits are active; nothing but pruning written
	ErrLateReply        = luakit.ErrLateReply        // granted after the local estimate elapsed: the permit was released again
	ErrUncertain        = luakit.ErrUncertain        // no reply read: an acquisition, renewal or release may have run
	ErrLost             = luakit.ErrLost             // a Permit's cause: the server no longer holds it for this owner
	ErrExpired          = luakit.ErrExpired          // a Permit's cause: its local estimate elapsed without a confirmed renewal
	ErrReleased         = luakit.ErrReleased         // a Permit's cause: a release (Release or Close) was sent
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning // a second KeepAlive on one Permit
	ErrInvalidTTL       = luakit.ErrInvalidTTL       // a TTL below 1ms (0 included), before any I/O
)

// The other conditions every Coordkit module shares, as the semaphore returns them.
var (
	ErrInvalidConfig = luakit.ErrInvalidConfig // every bad option or argument (empty key, capacity, TTL), before any I/O
	ErrNilClient     = luakit.ErrNilClient     // New was given a nil rueidis.Client
	ErrClosed        = luakit.ErrClosed        // TryAcquire or Acquire after Semaphore.Close
)

// The semaphore's own errors.
var (
	// ErrCapacityMismatch is wrapped by every [*CapacityMismatchError]: permits are active under a
	// different capacity. Nothing but the pruning of expired permits was written.
	ErrCapacityMismatch = errors.New("semaphore: capacity differs from the active permits' capacity")

	// ErrInvalidCapacity is returned by [New] for a capacity below 1 or above 2^53 (scores are doubles).
	// It matches [ErrInvalidConfig].
	ErrInvalidCapacity = luakit.ConfigSentinel("semaphore: capacity must be between 1 and 2^53")
)

// errClosed is ErrClosed as the semaphore returns it: with the module's prefix.
var errClosed = fmt.Errorf("semaphore: %w", ErrClosed)

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

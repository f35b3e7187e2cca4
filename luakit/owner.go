package luakit

import "errors"

// The ownership errors shared by every handle-holding primitive (lock, lease, rwlock, semaphore,
// redlock, and leader through lock). Each module re-exports the ones it returns under its own name
// (lock.ErrLost == luakit.ErrLost), so one errors.Is check works whichever primitive returned the error.
// The contract they belong to is in package github.com/coordkit/coordkit/luakit/ownership.
var (
	// ErrNotAcquired is returned by a try-acquisition when another owner (or, for a semaphore, enough
	// owners) holds the resource. Nothing was written.
	ErrNotAcquired = errors.New("coordkit: not acquired: held by another owner")

	// ErrLateReply is returned when the server granted an acquisition but its reply arrived after the
	// handle's local estimate had already elapsed: the grant may have expired and been taken by someone
	// else, so it is not reported as acquired. An owner-checked release was sent.
	ErrLateReply = errors.New("coordkit: acquisition reply arrived after the local estimate elapsed")

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): the server state is unknown. An acquisition may have
	// been applied (it then expires after its TTL unless the owner-checked cleanup removed it), a
	// renewal may still run, a release may or may not have removed the hold.
	ErrUncertain = errors.New("coordkit: outcome uncertain")

	// ErrLost is a handle's cause (Err, context.Cause of Context) once the server said this owner no
	// longer holds it: it expired and possibly was taken, or was deleted.
	ErrLost = errors.New("coordkit: ownership lost")

	// ErrExpired is a handle's cause once its local estimate elapsed without a confirmed renewal: the
	// server may already have expired the hold.
	ErrExpired = errors.New("coordkit: ownership's local estimate elapsed")

	// ErrReleased is a handle's cause once a release was sent (whatever its outcome).
	ErrReleased = errors.New("coordkit: ownership released")

	// ErrInvalidTTL is returned, before any I/O, for a TTL the primitive cannot send: below one
	// millisecond (TTLs are whole milliseconds), or zero where the primitive has no "no expiry" form.
	// Each module's ErrInvalidTTL wraps or equals it. It also matches [ErrInvalidConfig].
	ErrInvalidTTL = ConfigSentinel("coordkit: invalid TTL")

	// ErrKeepAliveRunning is returned by a handle's KeepAlive when a keep-alive already runs on it.
	ErrKeepAliveRunning = errors.New("coordkit: keep-alive already running")
)

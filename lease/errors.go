package lease

import "errors"

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
//
// A server without hash-field expiry makes every I/O call fail, before anything is written, with a
// *luakit.UnsupportedError wrapped in a "lease: " error: errors.Is(err, luakit.ErrUnsupported) reports
// true, and the message names the feature (hash-field expiry, HPEXPIRE) and the minimum servers (Redis
// 7.4 or Valkey 9.0).
var (
	// ErrNotAcquired is returned by [Leases.TryAcquire] when another owner holds the field. Nothing was
	// written.
	ErrNotAcquired = errors.New("lease: field is held by another owner")

	// ErrExpiringHash is returned by [Leases.TryAcquire] and [Leases.Acquire] when the hash key has a
	// key-level expiry (PTTL other than -1): it would delete every lease in the hash at once. Nothing was
	// written. Remove the key's TTL (PERSIST) or use another hash key.
	ErrExpiringHash = errors.New("lease: hash key has a key-level expiry; named leases need a persistent hash")

	// ErrLateReply is returned when the server granted the lease but its reply arrived after the lease's
	// local estimate had already elapsed, so the field may have expired and been taken by someone else.
	// The acquisition is not reported as acquired; an owner-checked release was attempted.
	ErrLateReply = errors.New("lease: acquisition reply arrived after the lease's local estimate elapsed")

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): an acquisition may have been applied (the field then
	// expires after its TTL unless the owner-checked cleanup succeeded), a renewal may still run, a
	// release may or may not have deleted the field. It is also the cause reported by [Lease.Err] and
	// [Lease.Context] once a renewal outcome was uncertain: the handle fails closed. (An uncertain
	// Release ends the handle with [ErrReleased] first; retry Release to settle it.)
	ErrUncertain = errors.New("lease: outcome uncertain")

	// ErrInvalidTTL is returned, before any I/O, for a lease TTL shorter than one millisecond.
	ErrInvalidTTL = errors.New("lease: lease TTL must be at least 1ms")

	// ErrEmptyField is returned, before any I/O, for an empty field (lease name).
	ErrEmptyField = errors.New("lease: field is empty")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("lease: nil rueidis client")

	// ErrLost is the cause reported by [Lease.Err] and [Lease.Context] when the server says this owner no
	// longer holds the field (it expired and possibly was taken, or was deleted).
	ErrLost = errors.New("lease: lease lost")

	// ErrExpired is the cause reported by [Lease.Err] and [Lease.Context] when the lease's local estimate
	// elapsed without a confirmed renewal: the server may already have expired the field.
	ErrExpired = errors.New("lease: lease local estimate elapsed")

	// ErrReleased is the cause reported by [Lease.Err] and [Lease.Context] after [Lease.Release] was
	// called on the handle (whatever its outcome).
	ErrReleased = errors.New("lease: lease released")
)

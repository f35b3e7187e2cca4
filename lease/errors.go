package lease

import (
	"errors"

	"github.com/coordkit/coordkit/luakit"
)

// Errors shared by every Coordkit handle, re-exported: each is the luakit value itself, so
// errors.Is(err, lease.ErrLost) and errors.Is(err, luakit.ErrLost) agree (and match lock.ErrLost too).
// Their meaning for every handle is the contract in package
// github.com/coordkit/coordkit/luakit/ownership. Compare with errors.Is: they are returned wrapped
// with a "lease: " prefix and detail, except as a handle's cause (Lease.Err, context.Cause of
// Lease.Context).
var (
	// ErrNotAcquired is wrapped by [Leases.TryAcquire]'s error when another owner holds the field.
	// Nothing was written.
	ErrNotAcquired = luakit.ErrNotAcquired

	// ErrLateReply is wrapped when the server granted the lease but its reply arrived after the lease's
	// local estimate had already elapsed: the field may have expired and been taken by someone else. The
	// acquisition is not reported as acquired; an owner-checked release was sent.
	ErrLateReply = luakit.ErrLateReply

	// ErrUncertain is wrapped by failures where a command may have reached the server but no reply was
	// read (timeout, cancellation, broken connection): an acquisition may have been applied (the field
	// then expires after its TTL unless the owner-checked cleanup removed it), a renewal may still run
	// (the handle keeps its previous estimate), a release may or may not have deleted the field.
	ErrUncertain = luakit.ErrUncertain

	// ErrLost is a lease's cause once the server said this owner no longer holds the field (it expired
	// and possibly was taken, or was deleted).
	ErrLost = luakit.ErrLost

	// ErrExpired is a lease's cause once its local estimate elapsed without a confirmed renewal, or a
	// renewal's reply arrived after it elapsed: the server may already have expired the field.
	ErrExpired = luakit.ErrExpired

	// ErrReleased is a lease's cause once a release was sent (whatever its outcome).
	ErrReleased = luakit.ErrReleased

	// ErrKeepAliveRunning is returned by Lease.KeepAlive when a keep-alive already runs on the lease.
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning

	// ErrInvalidTTL is wrapped, before any I/O, for a lease TTL shorter than one millisecond: by
	// TryAcquire and Acquire, and by Lease.ExtendTTL, which leaves the lease unchanged.
	ErrInvalidTTL = luakit.ErrInvalidTTL
)

// Errors of this package.
//
// A server without hash-field expiry makes every I/O call fail, before anything is written, with a
// *luakit.UnsupportedError wrapped in a "lease: " error: errors.Is(err, luakit.ErrUnsupported) reports
// true, and the message names the feature (hash-field expiry, HPEXPIRE) and the minimum servers (Redis
// 7.4 or Valkey 9.0).
var (
	// ErrExpiringHash is returned by [Leases.TryAcquire] and [Leases.Acquire] when the hash key has a
	// key-level expiry (PTTL other than -1): it would delete every lease in the hash at once. Nothing was
	// written. Remove the key's TTL (PERSIST) or use another hash key.
	ErrExpiringHash = errors.New("lease: hash key has a key-level expiry; named leases need a persistent hash")

	// ErrEmptyField is returned, before any I/O, for an empty field (lease name).
	ErrEmptyField = errors.New("lease: field is empty")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("lease: nil rueidis client")
)

package lease

import (
	"errors"

	"github.com/coordkit/coordkit/luakit"
)

// The ownership errors are luakit's shared values (lease.ErrLost == luakit.ErrLost), so one errors.Is
// check works whichever Coordkit primitive returned the error. What each means for every handle is
// the contract in package github.com/coordkit/coordkit/luakit/ownership; the comments say what it
// means here. Most are returned wrapped with a "lease: " prefix and detail.
var (
	ErrNoPermission     = luakit.ErrNoPermission     // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrForeignData      = luakit.ErrForeignData      // the hash key holds another Redis type (with or without an expiry): TryAcquire and Acquire return it at once; nothing written
	ErrNotAcquired      = luakit.ErrNotAcquired      // TryAcquire: another owner holds the field; nothing written
	ErrLateReply        = luakit.ErrLateReply        // granted after the local estimate elapsed: the field was released again
	ErrUncertain        = luakit.ErrUncertain        // no reply read: an acquisition, renewal or release may have run
	ErrLost             = luakit.ErrLost             // a Lease's cause: the server no longer holds the field for this owner
	ErrExpired          = luakit.ErrExpired          // a Lease's cause: its local estimate elapsed without a confirmed renewal
	ErrReleased         = luakit.ErrReleased         // a Lease's cause: a release was sent (whatever its outcome)
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning // a second KeepAlive on one Lease
	ErrInvalidTTL       = luakit.ErrInvalidTTL       // a lease TTL under 1ms (acquisition or ExtendTTL), before any I/O
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
	//
	// It matches neither [luakit.ErrForeignData] nor [ErrInvalidConfig]: the hash may well hold only this
	// package's leases (the expiry is a setting of the key, applied by someone's EXPIRE, not data that
	// does not decode), and it is found on the server, not in the arguments before any I/O.
	ErrExpiringHash = errors.New("lease: hash key has a key-level expiry; named leases need a persistent hash")

	// ErrEmptyField is returned, before any I/O, for an empty field (lease name). It matches
	// [ErrInvalidConfig].
	ErrEmptyField = luakit.ConfigSentinel("lease: field is empty")
)

// The other conditions every Coordkit module shares, as the lease package returns them.
var (
	ErrInvalidConfig = luakit.ErrInvalidConfig // every bad option or argument (empty hash key or field, TTL), before any I/O
	ErrNilClient     = luakit.ErrNilClient     // New was given a nil rueidis.Client
)

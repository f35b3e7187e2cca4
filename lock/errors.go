package lock

import (
	"github.com/coordkit/coordkit/luakit"
)

// The ownership errors are luakit's shared values (lock.ErrLost == luakit.ErrLost), so one errors.Is
// check works whichever Coordkit primitive returned the error. What each means for every handle is
// the contract in package github.com/coordkit/coordkit/luakit/ownership; the comments say what it
// means here. Most are returned wrapped with a "lock: " prefix and detail.
var (
	ErrNoPermission     = luakit.ErrNoPermission     // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrNotAcquired      = luakit.ErrNotAcquired      // TryAcquire: another owner holds the lease; nothing written, the counter did not advance
	ErrLateReply        = luakit.ErrLateReply        // granted after the local estimate elapsed: released again (the counter advanced)
	ErrUncertain        = luakit.ErrUncertain        // no reply read: an acquisition, renewal or release may have run
	ErrLost             = luakit.ErrLost             // a Lease's cause: the server no longer holds the lease for this owner
	ErrExpired          = luakit.ErrExpired          // a Lease's cause: its local estimate elapsed without a confirmed renewal
	ErrReleased         = luakit.ErrReleased         // a Lease's cause: a release was sent (whatever its outcome)
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning // a second KeepAlive on one Lease
	ErrInvalidTTL       = luakit.ErrInvalidTTL       // a lease TTL under 1ms (acquisition or ExtendTTL), before any I/O
)

// The other conditions every Coordkit module shares, as the lock returns them.
var (
	ErrInvalidConfig = luakit.ErrInvalidConfig // every bad option or argument (empty name or key, TTL, equal keys, keys in two slots), before any I/O
	ErrForeignData   = luakit.ErrForeignData   // a *CounterError whose fence key holds another type or a value the lock never writes
	ErrNilClient     = luakit.ErrNilClient     // New was given a nil rueidis.Client
)

// The lock's own errors.
var (
	// ErrCounter is wrapped by every [*CounterError]: a fence counter cannot issue a fencing token
	// (luakit's value, shared with the other fenced modules).
	ErrCounter = luakit.ErrCounter

	// ErrSameKey is returned, before any I/O, when the lease key and the fence key given to
	// [Locker.TryAcquireKeys] or [Locker.AcquireKeys] are equal (after the key prefix is applied): the
	// counter must outlive every lease. It matches [ErrInvalidConfig].
	ErrSameKey = luakit.ConfigSentinel("lock: lease key and fence key must differ")
)

// CounterReason says why a fence counter cannot issue a token: luakit's type, shared with the other
// fenced modules.
type CounterReason = luakit.CounterReason

// The reasons a fence counter is rejected (luakit's values). The acquisition wrote nothing.
const (
	CounterExpiring  = luakit.CounterExpiring  // the counter key has a TTL
	CounterNegative  = luakit.CounterNegative  // the counter holds a negative integer
	CounterMalformed = luakit.CounterMalformed // the counter holds something other than a decimal int64
	CounterOverflow  = luakit.CounterOverflow  // the counter is at the int64 maximum
	CounterWrongType = luakit.CounterWrongType // the counter key holds a non-string type
)

// CounterError reports a fence counter that cannot issue a fencing token: luakit's type, so errors.As
// with lock's and redlock's CounterError finds the same errors. It wraps [ErrCounter]; with reason
// [CounterWrongType], [CounterMalformed] or [CounterNegative] it also matches [ErrForeignData].
type CounterError = luakit.CounterError

package lock

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
)

// The ownership errors, shared with every Coordkit primitive: each is the luakit value of the same name
// (lock.ErrLost == luakit.ErrLost), so one errors.Is check works whichever primitive returned the error.
// The contract they belong to is in package github.com/coordkit/coordkit/luakit/ownership. Compare with
// errors.Is: most are returned wrapped with detail.
var (
	// ErrNotAcquired is returned by [Locker.TryAcquire] when another owner holds the lease. Nothing was
	// written: the counter did not advance.
	ErrNotAcquired = luakit.ErrNotAcquired

	// ErrLateReply is returned when the server granted the lease but its reply arrived after the
	// lease's local estimate had already elapsed, so the lease may have expired and been taken by someone
	// else. The acquisition is not reported as acquired; an owner-checked release was sent. The counter
	// advanced (tokens can have gaps).
	ErrLateReply = luakit.ErrLateReply

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection). The server state is unknown: an acquisition may have
	// been applied (the lease then expires after its TTL unless the owner-checked cleanup removed it), a
	// renewal may still run, a release may or may not have deleted the lease.
	ErrUncertain = luakit.ErrUncertain

	// ErrLost is a [Lease]'s cause (Err, context.Cause of Context) once the server said this owner no
	// longer holds the lease (it expired and possibly was taken, or was deleted).
	ErrLost = luakit.ErrLost

	// ErrExpired is a Lease's cause once its local estimate elapsed without a confirmed renewal: the
	// server may already have expired it.
	ErrExpired = luakit.ErrExpired

	// ErrReleased is a Lease's cause once a release was sent on the handle (whatever its outcome).
	ErrReleased = luakit.ErrReleased

	// ErrKeepAliveRunning is returned by a Lease's KeepAlive when a keep-alive already runs on it.
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning

	// ErrInvalidTTL is returned, before any I/O, for a lease TTL shorter than one millisecond, by the
	// acquisitions and by a Lease's ExtendTTL (TTLs are whole milliseconds; a lock has no lease without
	// expiry).
	ErrInvalidTTL = luakit.ErrInvalidTTL
)

// The lock's own errors.
var (
	// ErrCounter is wrapped by every [*CounterError]: the fence key cannot issue a fencing token.
	ErrCounter = errors.New("lock: fence counter cannot issue a token")

	// ErrSameKey is returned, before any I/O, when the lease key and the fence key are equal (after the
	// key prefix is applied): the counter must outlive every lease.
	ErrSameKey = errors.New("lock: lease key and fence key must differ")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("lock: nil rueidis client")
)

// CounterReason says why a fence counter cannot issue a token.
type CounterReason string

// The reasons a fence counter is rejected. In each case the acquisition wrote nothing.
const (
	// CounterExpiring: the counter key has a TTL. A counter that can expire can reissue old tokens.
	CounterExpiring CounterReason = "expiring"
	// CounterNegative: the counter holds a negative integer; tokens must be positive.
	CounterNegative CounterReason = "negative"
	// CounterMalformed: the counter holds something other than a decimal int64.
	CounterMalformed CounterReason = "malformed"
	// CounterOverflow: the counter holds 9223372036854775807; the next token would overflow int64.
	CounterOverflow CounterReason = "overflow"
	// CounterWrongType: the counter key holds a non-string Redis type.
	CounterWrongType CounterReason = "wrongtype"
)

// CounterError reports a fence counter that cannot issue a fencing token. It wraps [ErrCounter].
// The acquisition that returned it wrote nothing: no lease, and the counter is unchanged.
type CounterError struct {
	Reason CounterReason
}

// Error describes the counter problem and how to fix it; it never includes key names.
func (e *CounterError) Error() string {
	switch e.Reason {
	case CounterExpiring:
		return "lock: fence counter has an expiry; it must persist (remove the TTL)"
	case CounterNegative:
		return "lock: fence counter is negative; fencing tokens must be positive"
	case CounterMalformed:
		return "lock: fence counter does not hold a decimal int64"
	case CounterOverflow:
		return "lock: fence counter is at the int64 maximum; the next token would overflow"
	case CounterWrongType:
		return "lock: fence key holds a non-string type"
	}
	return fmt.Sprintf("lock: fence counter unusable (%s)", string(e.Reason))
}

// Unwrap returns [ErrCounter].
func (e *CounterError) Unwrap() error { return ErrCounter }

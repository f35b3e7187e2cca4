package rwlock

import (
	"errors"

	"github.com/coordkit/coordkit/luakit"
)

// Sentinel errors. Compare with errors.Is: some are returned wrapped with detail. The ownership errors
// are luakit's shared values, so errors.Is(err, rwlock.ErrLost) and errors.Is(err, luakit.ErrLost)
// agree whichever Coordkit primitive returned err.
var (
	// ErrNotAcquired is returned by [Locker.TryAcquireRead] when a writer holds the key, and by
	// [Locker.TryAcquireWrite] when any reader or a writer holds it. Nothing was written. It is
	// [luakit.ErrNotAcquired].
	ErrNotAcquired = luakit.ErrNotAcquired

	// ErrLateReply is returned when the server granted the lease but its reply arrived after the
	// lease's local estimate had already elapsed, so the entry may have expired and been followed by a
	// conflicting holder. The acquisition is not reported as acquired; an owner-checked release was
	// sent. It is [luakit.ErrLateReply].
	ErrLateReply = luakit.ErrLateReply

	// ErrUncertain wraps failures where a command may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): an acquisition may have been applied (its entry then
	// expires after its TTL unless the owner-checked cleanup removed it), a renewal may still run, a
	// release may or may not have removed the entry. It is [luakit.ErrUncertain].
	ErrUncertain = luakit.ErrUncertain

	// ErrLost is a lease's cause ([Lease.Err], context.Cause of [Lease.Context]) once the server said
	// this owner's entry is gone: it expired (possibly followed by a conflicting holder) or was deleted.
	// It is [luakit.ErrLost].
	ErrLost = luakit.ErrLost

	// ErrExpired is a lease's cause once its local estimate elapsed without a confirmed renewal: the
	// server may already have expired the entry. It is [luakit.ErrExpired].
	ErrExpired = luakit.ErrExpired

	// ErrReleased is a lease's cause once [Lease.Release] or [Lease.Close] sent a release (whatever its
	// outcome). It is [luakit.ErrReleased].
	ErrReleased = luakit.ErrReleased

	// ErrKeepAliveRunning is returned by [Lease.KeepAlive] when a keep-alive already runs on the lease.
	// It is [luakit.ErrKeepAliveRunning].
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning

	// ErrInvalidTTL is returned, wrapped, before any I/O for a lease TTL shorter than one millisecond
	// (by an acquisition or ExtendTTL). It is [luakit.ErrInvalidTTL].
	ErrInvalidTTL = luakit.ErrInvalidTTL

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("rwlock: nil rueidis client")
)

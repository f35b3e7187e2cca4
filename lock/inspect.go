package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

var (
	// inspectScript runs read-only (EVALSHA_RO, EVAL_RO after a script flush): the server itself
	// refuses a write from it.
	inspectScript      = luakit.NewReadOnlyScript("inspect", luakit.MustLoad(scriptFS, "inspect").Source())
	forceReleaseScript = luakit.MustLoad(scriptFS, "force_release")
)

// Inspection is what [Locker.Inspect] reports about one lock at one instant: a small value for
// operators and dashboards. It never carries the owner token. Its zero value (Exists false) describes
// a lock that was never taken (no lease, no fence key).
type Inspection struct {
	// Exists reports whether the lease key exists, that is whether some owner holds the lock.
	Exists bool
	// Remaining is the lease key's remaining life on the server (PTTL, millisecond resolution) when it
	// was read; 0 when not held or NoExpiry.
	Remaining time.Duration
	// NoExpiry is true for a lease key without expiry, which this package never writes.
	NoExpiry bool
	// FencingToken is the fence counter's value: the last fencing token issued (the current holder's
	// when Exists, the next holder gets a higher one). 0 when the fence key does not exist.
	FencingToken int64
}

// Inspect reads the lock named name (keys derived as by [Keys], after the Locker's prefix) without
// changing it: one read-only script (EVALSHA_RO) reads the lease key's existence and PTTL and the fence counter,
// atomically. No value or expiry is written (PTTL before and after are equal); it reveals no owner
// token, so it cannot be used to renew or release a lease. The read counts as an access for the
// server's LRU/LFU eviction, as any read does.
//
// It fails before any I/O with an error matching [ErrInvalidConfig] for an empty name (or a name whose
// keys cannot share a slot, see # Keys); with an error wrapping [ErrForeignData] when either key holds
// another Redis type or the fence key a value the lock never writes; or with the client's error (a
// timeout or cancellation changes nothing). It blocks for one round trip, bounded by ctx. Safe for
// concurrent use.
func (l *Locker) Inspect(ctx context.Context, name string) (Inspection, error) {
	r, err := l.named(name, time.Millisecond)
	if err != nil {
		return Inspection{}, err
	}
	return l.inspect(ctx, r)
}

// InspectKeys is [Locker.Inspect] for a lock whose two keys are given (the layout of
// [Locker.TryAcquireKeys]), validated as there before any I/O.
func (l *Locker) InspectKeys(ctx context.Context, leaseKey, fenceKey string) (Inspection, error) {
	r, err := l.explicit(leaseKey, fenceKey, time.Millisecond)
	if err != nil {
		return Inspection{}, err
	}
	return l.inspect(ctx, r)
}

func (l *Locker) inspect(ctx context.Context, r request) (Inspection, error) {
	return ownership.Do(ctx, &l.own, "INSPECT", func(ctx context.Context) (Inspection, error) { return l.inspectOnce(ctx, r) })
}

func (l *Locker) inspectOnce(ctx context.Context, r request) (Inspection, error) {
	arr, err := inspectScript.Exec(ctx, l.client, []string{r.lease(), r.fence()}, nil).ToArray()
	if err != nil {
		return Inspection{}, fmt.Errorf("lock: inspect: %w", luakit.MarkForeign(err))
	}
	return decodeInspection(arr)
}

// decodeInspection decodes the reply of inspect.lua: {held, pttl, fence}.
func decodeInspection(arr []rueidis.RedisMessage) (Inspection, error) {
	if len(arr) != 3 {
		return Inspection{}, fmt.Errorf("lock: inspect: unexpected reply of %d elements", len(arr))
	}
	held, err := arr[0].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("lock: inspect: %w", err)
	}
	if held == luakit.StatusForeign {
		return Inspection{}, fmt.Errorf("lock: inspect: %w (a key holds another Redis type)", ErrForeignData)
	}
	pttl, err := arr[1].AsInt64()
	if err != nil {
		return Inspection{}, fmt.Errorf("lock: inspect: pttl: %w", err)
	}
	fence, err := arr[2].ToString()
	if err != nil {
		return Inspection{}, fmt.Errorf("lock: inspect: fence: %w", err)
	}
	var in Inspection
	if fence != "" {
		v, perr := luakit.ParseInt64(fence)
		if perr != nil || v < 1 {
			return Inspection{}, fmt.Errorf("lock: inspect: %w (the fence key is not a positive decimal int64)", ErrForeignData)
		}
		in.FencingToken = v
	}
	if held == luakit.StatusOK {
		in.Exists, in.NoExpiry = true, pttl < 0
		if pttl >= 0 {
			in.Remaining = time.Duration(pttl) * time.Millisecond
		}
	}
	return in, nil
}

// ForceRelease deletes the lease of the lock named name whoever holds it: an operator's action for a
// lease whose holder is stuck. It reports whether a lease was deleted (false: the lock was free and
// nothing was written). The fence counter is left as it is, so the next holder's fencing token is still
// higher than the one the evicted holder got; that holder is not told, and learns of the loss at its
// next renewal or verification ([ErrLost]). Until then it may keep working, which is exactly what the
// fencing token lets the protected resource reject.
//
// It fails before any I/O with an error matching [ErrInvalidConfig] for an invalid name, with one
// wrapping [ErrForeignData] when the lease key holds another Redis type (left alone), and with one
// wrapping [ErrUncertain] when the reply was lost (the lease may or may not be gone). It blocks for one
// round trip (one script), bounded by ctx. Safe for concurrent use.
func (l *Locker) ForceRelease(ctx context.Context, name string) (bool, error) {
	r, err := l.named(name, time.Millisecond)
	if err != nil {
		return false, err
	}
	return l.forceRelease(ctx, r)
}

// ForceReleaseKeys is [Locker.ForceRelease] for a lock whose two keys are given, validated as by
// [Locker.TryAcquireKeys]; only the lease key is written.
func (l *Locker) ForceReleaseKeys(ctx context.Context, leaseKey, fenceKey string) (bool, error) {
	r, err := l.explicit(leaseKey, fenceKey, time.Millisecond)
	if err != nil {
		return false, err
	}
	return l.forceRelease(ctx, r)
}

func (l *Locker) forceRelease(ctx context.Context, r request) (bool, error) {
	return ownership.Do(ctx, &l.own, "FORCE RELEASE", func(ctx context.Context) (bool, error) { return l.forceReleaseOnce(ctx, r) })
}

func (l *Locker) forceReleaseOnce(ctx context.Context, r request) (bool, error) {
	n, err := forceReleaseScript.Exec(ctx, l.client, []string{r.lease()}, nil).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("lock: force release: %w: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("lock: force release: %w", luakit.MarkForeign(err))
	}
	if n == luakit.StatusForeign {
		return false, fmt.Errorf("lock: force release: %w (the lease key holds another Redis type)", ErrForeignData)
	}
	return n == luakit.StatusOK, nil
}

package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Locker takes fenced leases through one rueidis client. Create it with [New]; it is safe for concurrent
// use by many goroutines and holds no background goroutines of its own. The zero value is not usable.
//
// A Locker never closes or reconfigures the caller's client.
type Locker struct {
	client rueidis.Client
	keys   luakit.Keyspace
	own    ownership.Config // shared by every Lease of this Locker
	waiter ownership.Waiter // Acquire's waiting loop; warns once per Locker without working tracking
}

// New returns a Locker over client. It does no I/O. It fails with [ErrNilClient] for a nil client and
// with a descriptive error for an invalid option.
func New(client rueidis.Client, opts ...Option) (*Locker, error) {
	if client == nil {
		return nil, ErrNilClient
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	l := &Locker{client: client, keys: cfg.keys, own: cfg.own}
	l.waiter = ownership.Waiter{Client: client, Tracker: cfg.tracker, Config: &l.own} // re-checks every 1s without expiry or tracking
	return l, nil
}

// keys is the validated, prefixed pair of physical keys of one lock.
type keys struct {
	lease, fence string
}

// prepare validates the request before any I/O and returns the physical keys and the TTL in ms.
func (l *Locker) prepare(leaseKey, fenceKey string, ttl time.Duration) (keys, int64, error) {
	if err := luakit.ValidateKey("lease key", leaseKey); err != nil {
		return keys{}, 0, fmt.Errorf("lock: %w", err)
	}
	if err := luakit.ValidateKey("fence key", fenceKey); err != nil {
		return keys{}, 0, fmt.Errorf("lock: %w", err)
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return keys{}, 0, fmt.Errorf("lock: %w: a lease needs at least 1ms (got %v)", ErrInvalidTTL, ttl)
	}
	k := keys{lease: l.keys.Key(leaseKey), fence: l.keys.Key(fenceKey)}
	if k.lease == k.fence {
		return keys{}, 0, ErrSameKey
	}
	if l.client.Mode() == rueidis.ClientModeCluster {
		if err := luakit.CheckSameSlot(
			luakit.NamedKey{Role: "lease key", Key: k.lease},
			luakit.NamedKey{Role: "fence key", Key: k.fence},
		); err != nil {
			return keys{}, 0, fmt.Errorf("lock: %w", err)
		}
	}
	return k, ms, nil
}

// TryAcquire makes one attempt to take the lease at leaseKey, issuing the next fencing token from the
// counter at fenceKey, and returns at once.
//
// ttl is the lease duration, truncated to whole milliseconds; it must be at least 1ms. Both keys are
// binary-safe, get the Locker's prefix, must differ, and on Cluster must hash to the same slot (use a
// common hash tag such as "{invoice:42}:lease" / "{invoice:42}:fence"). Invalid input fails before any
// I/O.
//
// It returns the held [*Lease] on success. Otherwise it returns a nil Lease and:
//   - [ErrNotAcquired] when another owner holds the lease (nothing written);
//   - a [*CounterError] (wrapping [ErrCounter]) when the counter is expiring, negative, malformed,
//     overflowing or of the wrong type (nothing written);
//   - [ErrLateReply] when the grant arrived after the local estimate elapsed (an owner-checked release
//     was sent; the counter advanced, so tokens have a gap);
//   - an error wrapping [ErrUncertain] and the cause (such as ctx.Err()) when the script may have run
//     but no reply was read (an owner-checked release bounded by the cleanup timeout was sent behind
//     it; otherwise the lease expires after ttl, and the counter may have skipped a value);
//   - a server or connection error, classified by [luakit.Classify].
//
// ctx bounds the round trip. Cancellation does not undo an acquisition the server already applied.
func (l *Locker) TryAcquire(ctx context.Context, leaseKey, fenceKey string, ttl time.Duration) (*Lease, error) {
	k, ms, err := l.prepare(leaseKey, fenceKey, ttl)
	if err != nil {
		return nil, err
	}
	lease, _, err := l.attempt(ctx, k, leaseKey, fenceKey, ms)
	return lease, err
}

// attempt runs the acquire script once. On ErrNotAcquired it also returns the holder's remaining
// lease time (-1 for a lease without expiry).
func (l *Locker) attempt(ctx context.Context, k keys, leaseKey, fenceKey string, ms int64) (*Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		// Nothing was sent: not uncertain.
		return nil, 0, fmt.Errorf("lock: acquire: %w", err)
	}
	owner, err := luakit.NewOwnerToken()
	if err != nil {
		return nil, 0, fmt.Errorf("lock: owner token: %w", err)
	}
	start, resp := ownership.Send(ctx, acquireScript, l.client, []string{k.lease, k.fence}, []string{owner, strconv.FormatInt(ms, 10)})
	arr, err := resp.ToArray()
	if err != nil {
		if luakit.IsUncertain(err) {
			if l.cleanup(ctx, k, owner) {
				return nil, 0, &settledError{err: fmt.Errorf("lock: acquire: %w: %w (cleanup confirmed this owner holds no lease)", ErrUncertain, err)}
			}
			return nil, 0, fmt.Errorf("lock: acquire: %w: %w", ErrUncertain, err)
		}
		return nil, 0, fmt.Errorf("lock: acquire: %w", err)
	}
	if len(arr) != 2 {
		return nil, 0, fmt.Errorf("lock: acquire: unexpected reply of %d elements", len(arr))
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("lock: acquire: status: %w", err)
	}
	switch status {
	case 1:
		token, err := luakit.Int64(arr[1])
		if err != nil || token <= 0 {
			// Cannot happen with a validated counter; refuse to hand out a bad token.
			l.cleanup(ctx, k, owner)
			return nil, 0, fmt.Errorf("lock: acquire: fencing token: %w", errors.Join(ErrCounter, err))
		}
		lease, err := l.grant(ctx, k, leaseKey, fenceKey, owner, token, start, time.Duration(ms)*time.Millisecond)
		return lease, 0, err
	case 0:
		pttl, err := arr[1].AsInt64()
		if err != nil {
			return nil, 0, fmt.Errorf("lock: acquire: pttl: %w", err)
		}
		if pttl < 0 {
			return nil, -1, ErrNotAcquired
		}
		return nil, time.Duration(pttl) * time.Millisecond, ErrNotAcquired
	case -1:
		reason, err := arr[1].ToString()
		if err != nil {
			return nil, 0, fmt.Errorf("lock: acquire: reason: %w", err)
		}
		return nil, 0, &CounterError{Reason: CounterReason(reason)}
	}
	return nil, 0, fmt.Errorf("lock: acquire: unexpected status %d", status)
}

// cleanup sends the owner-checked release after an acquisition that gave no usable lease (see
// [ownership.Cleanup]: ordered behind it, bounded by the cleanup timeout, surviving ctx) and reports
// whether the server answered, which settles that this owner holds no lease.
func (l *Locker) cleanup(ctx context.Context, k keys, owner string) bool {
	b := &backend{client: l.client, key: [1]string{k.lease}, owner: [1]string{owner}}
	return ownership.Cleanup(ctx, &l.own, b.Release)
}

// settledError marks an uncertain acquisition whose owner-checked cleanup got an answer, so a waiting
// Acquire may try again.
type settledError struct{ err error }

func (e *settledError) Error() string { return e.err.Error() }
func (e *settledError) Unwrap() error { return e.err }

func isSettled(err error) bool {
	var s *settledError
	return errors.As(err, &s)
}

// Acquire takes the lease at leaseKey like [Locker.TryAcquire], waiting while another owner holds it.
//
// It waits as every Coordkit acquisition does (the contract's waiting rows, in package
// github.com/coordkit/coordkit/luakit/ownership): it sleeps until the lease key is invalidated or the
// holder's PTTL passes, then retries the atomic script; only the script grants ownership, and nothing
// is sent while it sleeps. On a client from [luakit.NewTrackedClient] it wakes on invalidations with no
// option ([WithTracker] overrides the tracker); on a client without working tracking (no tracker,
// RESP2, DisableCache) it logs one warning per Locker and wakes only at the holder's PTTL (every
// second for a lease without expiry), so a release is noticed late.
//
// Transient server errors, late grants ([ErrLateReply]) and an attempt whose outcome was uncertain (a
// broken connection) once its owner-checked cleanup was answered are retried after the retry delay;
// other errors end the wait. It blocks until the lease is acquired, ctx ends, or a non-retryable error
// occurs. When ctx ends it returns an error wrapping ctx.Err() (and [ErrUncertain] if an attempt was in
// flight; its cleanup is sent). Cancellation does not undo an acquisition the server already applied.
func (l *Locker) Acquire(ctx context.Context, leaseKey, fenceKey string, ttl time.Duration) (*Lease, error) {
	k, ms, err := l.prepare(leaseKey, fenceKey, ttl)
	if err != nil {
		return nil, err
	}
	var lease *Lease
	err = l.waiter.Wait(ctx, k.lease, func(ctx context.Context) ownership.Attempt {
		h, pttl, err := l.attempt(ctx, k, leaseKey, fenceKey, ms)
		switch {
		case err == nil:
			lease = h
			return ownership.Attempt{}
		case errors.Is(err, ErrNotAcquired):
			return ownership.Attempt{Busy: true, HolderTTL: pttl}
		case errors.Is(err, ErrLateReply), luakit.IsTransient(err), isSettled(err) && ctx.Err() == nil:
			// Late grants and settled uncertain attempts (for example a pooled connection that broke
			// when the server restarted) leave no lease of ours behind: try again.
			return ownership.Attempt{Retry: true}
		default:
			return ownership.Attempt{Err: err}
		}
	})
	if err != nil {
		return nil, err
	}
	return lease, nil
}

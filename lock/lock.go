package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Locker takes fenced leases through one rueidis client. Create it with [New]; it is safe for concurrent
// use by many goroutines and holds no background goroutines of its own. The zero value is not usable.
//
// A Locker never closes or reconfigures the caller's client.
type Locker struct {
	client rueidis.Client
	cfg    config
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
	return &Locker{client: client, cfg: cfg}, nil
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
		return keys{}, 0, fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl)
	}
	k := keys{lease: l.cfg.keys.Key(leaseKey), fence: l.cfg.keys.Key(fenceKey)}
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
//     was attempted);
//   - an error wrapping [ErrUncertain] and the cause (such as ctx.Err()) when the script may have run
//     but no reply was read (an owner-checked release bounded by the cleanup timeout was attempted;
//     otherwise the lease expires after ttl, and the counter may have skipped a value);
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
	start := time.Now()
	// No deadline: the connection stays open on timeout; ExecOrdered: the cleanup takes the same one.
	ectx, stop := luakit.WithoutDeadline(ctx)
	resp := acquireScript.ExecOrdered(ectx, l.client, []string{k.lease, k.fence}, []string{owner, strconv.FormatInt(ms, 10)})
	stop()
	arr, err := resp.ToArray()
	if err != nil {
		if luakit.IsUncertain(err) {
			if l.cleanup(ctx, k.lease, owner) {
				return nil, 0, &settledError{err: fmt.Errorf("%w: acquire: %w (cleanup confirmed this owner holds no lease)", ErrUncertain, err)}
			}
			return nil, 0, fmt.Errorf("%w: acquire: %w", ErrUncertain, err)
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
			l.cleanup(ctx, k.lease, owner)
			return nil, 0, fmt.Errorf("lock: acquire: fencing token: %w", errors.Join(ErrCounter, err))
		}
		ttl := time.Duration(ms) * time.Millisecond
		deadline := start.Add(ttl)
		if !time.Now().Before(deadline) {
			l.cleanup(ctx, k.lease, owner)
			return nil, 0, ErrLateReply
		}
		return newLease(l, k, leaseKey, fenceKey, owner, token, ttl, deadline), 0, nil
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

// cleanup sends a bounded owner-checked release that survives the caller's cancellation, and reports
// whether the server answered it, which settles that this owner holds no lease. Commands carry no
// socket deadline (see luakit.WithoutDeadline), so the connection of the uncertain command stays open,
// and the acquisition and the release both go through luakit's Script.ExecOrdered (a standalone
// client's first connection; on a Cluster client the key's node, one connection by default), so the
// release is queued behind the acquisition and the server runs them in order. It may still not reach
// the server (the network may be down, or the connection broke in between), and no order holds on a
// client with DisableAutoPipelining or a Cluster client with a raised PipelineMultiplex; the
// unreturned lease then expires after its TTL.
func (l *Locker) cleanup(ctx context.Context, leaseKey, owner string) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
	defer cancel()
	ectx, stop := luakit.WithoutDeadline(cctx)
	defer stop()
	return releaseScript.ExecOrdered(ectx, l.client, []string{leaseKey}, []string{owner}).Error() == nil
}

// settledError marks an uncertain acquisition whose owner-checked cleanup got an answer, so a waiting
// Acquire may try again.
type settledError struct{ err error }

func (e *settledError) Error() string { return e.err.Error() }
func (e *settledError) Unwrap() error { return e.err }

// Acquire takes the lease at leaseKey like [Locker.TryAcquire], waiting while another owner holds it.
//
// It waits without polling: it wakes when the lease key is invalidated (with [WithTracker] on a RESP3
// client with client-side caching) and at the holder's PTTL deadline, then retries the atomic script;
// only the script grants ownership. While waiting it sends no commands. Transient server errors are
// retried after the retry delay, and so is an attempt whose outcome was uncertain (a broken connection)
// once its owner-checked cleanup was answered; other errors end the wait.
//
// It blocks until the lease is acquired, ctx ends, or a non-retryable error occurs. When ctx ends it
// returns an error wrapping ctx.Err() (and [ErrUncertain] if an attempt was in flight; its cleanup is
// attempted). Cancellation does not undo an acquisition the server already applied.
func (l *Locker) Acquire(ctx context.Context, leaseKey, fenceKey string, ttl time.Duration) (*Lease, error) {
	k, ms, err := l.prepare(leaseKey, fenceKey, ttl)
	if err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lock: acquire: %w", err)
		}
		var watch *luakit.Watch
		if l.cfg.tracker != nil {
			// Register before any read so that no invalidation after it is missed.
			watch = l.cfg.tracker.Watch(k.lease)
		}
		lease, pttl, err := l.attempt(ctx, k, leaseKey, fenceKey, ms)
		var wait time.Duration
		switch {
		case err == nil:
			if watch != nil {
				watch.Stop()
			}
			return lease, nil
		case errors.Is(err, ErrNotAcquired):
			wait = pttl
			if watch != nil {
				// Arm tracking on this connection. If the lease vanished since the script ran, retry now;
				// if another owner took it meanwhile, its PTTL is the better deadline.
				exists, apttl, aerr := luakit.Arm(ctx, l.client, k.lease)
				switch {
				case aerr != nil && ctx.Err() != nil:
					watch.Stop()
					return nil, fmt.Errorf("lock: acquire: %w", ctx.Err())
				case aerr != nil:
					// Tracking unavailable for now: fall back to the PTTL deadline.
				case !exists:
					wait = 0
				case apttl >= 0 && (wait < 0 || apttl < wait):
					wait = apttl
				}
			}
			if wait < 0 {
				// A lease without expiry and no tracked read (no tracker, a RESP2 / cache-disabled
				// client, or a failed Arm): re-check on the untracked interval. A tracked read always
				// yields a positive deadline (the cache entry's life).
				wait = l.cfg.untrackedWait
			} else if wait > 0 || watch == nil {
				// The lease is logically expired once its PTTL has passed.
				wait += time.Millisecond
			}
		case errors.Is(err, ErrLateReply), luakit.IsTransient(err), isSettled(err) && ctx.Err() == nil:
			// Late grants and settled uncertain attempts (for example a pooled connection that broke
			// when the server restarted) leave no lease of ours behind: try again.
			wait = l.cfg.retryDelay
		default:
			if watch != nil {
				watch.Stop()
			}
			return nil, err
		}
		if wait == 0 {
			if watch != nil {
				watch.Stop()
			}
			continue
		}
		if err := luakit.Sleep(ctx, watch, wait); err != nil {
			return nil, fmt.Errorf("lock: acquire: %w", err)
		}
	}
}

func isSettled(err error) bool {
	var s *settledError
	return errors.As(err, &s)
}

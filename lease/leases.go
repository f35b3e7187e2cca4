package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Leases takes named leases, each one field of a Redis hash with its own expiry, through one rueidis
// client. Create it with [New]; it is safe for concurrent use by many goroutines and runs no background
// goroutines. The zero value is not usable.
//
// A Leases probes the server for hash-field expiry once, on its first I/O, and caches a definite answer
// (a failed probe is retried on the next call). Share a Leases between goroutines rather than creating
// one per call. It never closes or reconfigures the caller's client.
type Leases struct {
	client   rueidis.Client
	cfg      config
	features luakit.FeatureCache
}

// New returns a Leases over client. It does no I/O. It fails with [ErrNilClient] for a nil client and
// with a descriptive error for an invalid option; nil options are ignored.
func New(client rueidis.Client, opts ...Option) (*Leases, error) {
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
	return &Leases{client: client, cfg: cfg}, nil
}

// Holder is one named lease found by [Leases.Holders]. It never carries the owner token.
type Holder struct {
	// Field is the lease name (the hash field), exactly as stored.
	Field string
	// Remaining is the field's remaining life on the server (HPTTL, millisecond resolution) when it was
	// read; -1 for a field without expiry (one not written by this package).
	Remaining time.Duration
}

// validate checks the request before any I/O and returns the physical hash key and the TTL in ms.
func (ls *Leases) validate(hashKey, field string, ttl time.Duration) (string, int64, error) {
	if err := luakit.ValidateKey("hash key", hashKey); err != nil {
		return "", 0, fmt.Errorf("lease: %w", err)
	}
	if field == "" {
		return "", 0, ErrEmptyField
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return "", 0, fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl)
	}
	return ls.cfg.keys.Key(hashKey), ms, nil
}

// require fails, before any write, when the server lacks hash-field expiry (or the probe fails).
func (ls *Leases) require(ctx context.Context) error {
	if err := ls.features.Require(ctx, ls.client, luakit.HashFieldTTL); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// TryAcquire makes one attempt to take the named lease field in the hash at hashKey, and returns at
// once.
//
// ttl is the lease duration, truncated to whole milliseconds; it must be at least 1ms. The hash key
// (which gets the key prefix) and the field are binary-safe and must be non-empty. Invalid input fails
// before any I/O. The first call of a Leases probes the server for hash-field expiry (one extra round
// trip, then cached).
//
// It returns the held [*Lease] on success. Otherwise it returns a nil Lease and:
//   - an error wrapping [ErrNotAcquired] when another owner holds the field (nothing written);
//   - an error wrapping [ErrExpiringHash] when the hash key has a key-level expiry (nothing written);
//   - an error wrapping luakit.ErrUnsupported, naming the feature and the minimum servers, when the
//     server lacks hash-field expiry (Redis before 7.4, Valkey before 9.0; nothing written);
//   - [ErrLateReply] when the grant arrived after the local estimate elapsed (an owner-checked release
//     was attempted);
//   - an error wrapping [ErrUncertain] and the cause (such as ctx.Err()) when the script may have run
//     but no reply was read (an owner-checked release bounded by the cleanup timeout was attempted, even
//     though ctx ended; otherwise the field expires after ttl);
//   - a server or connection error, classified by [luakit.Classify] (WRONGTYPE when the key is not a
//     hash).
//
// ctx bounds the round trips. Cancellation does not undo an acquisition the server already applied.
func (ls *Leases) TryAcquire(ctx context.Context, hashKey, field string, ttl time.Duration) (*Lease, error) {
	key, ms, err := ls.validate(hashKey, field, ttl)
	if err != nil {
		return nil, err
	}
	if err := ls.require(ctx); err != nil {
		return nil, err
	}
	lease, _, err := ls.attempt(ctx, key, hashKey, field, ms)
	return lease, err
}

// attempt runs the acquire script once. On ErrNotAcquired it also returns the field's remaining life
// (-1 for a field without expiry).
func (ls *Leases) attempt(ctx context.Context, key, hashKey, field string, ms int64) (*Lease, time.Duration, error) {
	owner, err := luakit.NewOwnerToken()
	if err != nil {
		return nil, 0, fmt.Errorf("lease: owner token: %w", err)
	}
	start := time.Now()
	arr, err := acquireScript.Exec(ctx, ls.client, []string{key}, []string{field, owner, strconv.FormatInt(ms, 10)}).ToArray()
	if err != nil {
		if luakit.IsUncertain(err) {
			if ls.cleanup(ctx, key, field, owner) {
				return nil, 0, &settledError{err: fmt.Errorf("%w: acquire: %w (cleanup confirmed this owner holds no lease)", ErrUncertain, err)}
			}
			return nil, 0, fmt.Errorf("%w: acquire: %w", ErrUncertain, err)
		}
		return nil, 0, fmt.Errorf("lease: acquire: %w", err)
	}
	if len(arr) != 2 {
		return nil, 0, fmt.Errorf("lease: acquire: unexpected reply of %d elements", len(arr))
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("lease: acquire: status: %w", err)
	}
	n, err := arr[1].AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("lease: acquire: pttl: %w", err)
	}
	switch status {
	case 1:
		ttl := time.Duration(ms) * time.Millisecond
		deadline := start.Add(ttl)
		if !time.Now().Before(deadline) {
			ls.cleanup(ctx, key, field, owner)
			return nil, 0, ErrLateReply
		}
		return newLease(ls, key, hashKey, field, owner, ttl, deadline), 0, nil
	case 0:
		if n < 0 {
			return nil, -1, ErrNotAcquired
		}
		return nil, time.Duration(n) * time.Millisecond, ErrNotAcquired
	case -1:
		return nil, 0, fmt.Errorf("%w (key PTTL %dms)", ErrExpiringHash, n)
	}
	return nil, 0, fmt.Errorf("lease: acquire: unexpected status %d", status)
}

// cleanup sends a bounded owner-checked release that survives the caller's cancellation, and reports
// whether the server answered it, which settles that this owner holds no lease. It may not reach the
// server at all, and when it travels on another connection than the uncertain command a delayed
// acquisition can still land after it; the unreturned field then expires after its TTL.
func (ls *Leases) cleanup(ctx context.Context, key, field, owner string) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ls.cfg.cleanupTimeout)
	defer cancel()
	if err := releaseScript.Exec(cctx, ls.client, []string{key}, []string{field, owner}).Error(); err != nil {
		ls.cfg.logger.Warn("lease: owner-checked cleanup after an uncertain acquisition got no answer; the lease, if granted, expires after its TTL",
			"error_class", luakit.Classify(err).String())
		return false
	}
	return true
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

// Acquire takes the named lease like [Leases.TryAcquire], waiting while another owner holds the field.
//
// It waits without polling: it wakes when the hash key is invalidated (with [WithTracker] on a RESP3
// client with client-side caching) and at the held field's HPTTL deadline, then retries the atomic
// script; only the script grants ownership. Waiters watch the whole hash, so a change to any field
// wakes every waiter on that hash for another attempt. While waiting it sends no commands. Transient
// server errors, late replies and uncertain attempts whose owner-checked cleanup was answered are
// retried after the retry delay; other errors (including [ErrExpiringHash] and the unsupported-server
// error) end the wait.
//
// It blocks until the lease is acquired, ctx ends, or a non-retryable error occurs. When ctx ends it
// returns an error wrapping ctx.Err() (and [ErrUncertain] if an attempt was in flight; its cleanup is
// attempted). Cancellation does not undo an acquisition the server already applied.
func (ls *Leases) Acquire(ctx context.Context, hashKey, field string, ttl time.Duration) (*Lease, error) {
	key, ms, err := ls.validate(hashKey, field, ttl)
	if err != nil {
		return nil, err
	}
	if err := ls.require(ctx); err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lease: acquire: %w", err)
		}
		var watch *luakit.Watch
		if ls.cfg.tracker != nil {
			// Register before any read so that no invalidation after it is missed.
			watch = ls.cfg.tracker.Watch(key)
		}
		lease, pttl, err := ls.attempt(ctx, key, hashKey, field, ms)
		var wait time.Duration
		switch {
		case err == nil:
			if watch != nil {
				watch.Stop()
			}
			return lease, nil
		case errors.Is(err, ErrNotAcquired):
			wait = pttl
			tracked := false
			if watch != nil {
				// Arm tracking of the hash key on this connection. If the hash vanished since the script
				// ran, retry now. The hash itself has no expiry, so the field's HPTTL stays the deadline.
				exists, apttl, aerr := luakit.Arm(ctx, ls.client, key)
				tracked = aerr == nil && apttl > 0
				switch {
				case aerr != nil && ctx.Err() != nil:
					watch.Stop()
					return nil, fmt.Errorf("lease: acquire: %w", ctx.Err())
				case aerr != nil:
					// Tracking unavailable for now: fall back to the HPTTL deadline.
				case !exists:
					wait = 0
				}
			}
			if wait < 0 {
				// A field without expiry: an invalidation is the wake-up when the read is tracked, with a
				// re-check at least every luakit.ArmCacheTTL; otherwise (no tracker, RESP2 /
				// cache-disabled client, failed Arm) re-check on the untracked interval.
				if tracked {
					wait = luakit.ArmCacheTTL
				} else {
					wait = ls.cfg.untrackedWait
				}
			} else if wait > 0 || watch == nil {
				// The field is logically expired once its HPTTL has passed.
				wait += time.Millisecond
			}
		case errors.Is(err, ErrLateReply), luakit.IsTransient(err), isSettled(err) && ctx.Err() == nil:
			wait = ls.cfg.retryDelay
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
			return nil, fmt.Errorf("lease: acquire: %w", err)
		}
	}
}

// Holders lists the named leases currently in the hash at hashKey (the key prefix applies), sorted by
// field, each with its remaining life on the server, read atomically by one script. Owner tokens are
// never returned. An absent hash gives an empty list. It is read-only and O(N) in the number of fields.
//
// It fails before any I/O for an empty hash key, and with an error wrapping luakit.ErrUnsupported on a
// server without hash-field expiry. An uncertain read is reported as the client's error (it changes
// nothing). The list describes one instant: leases can expire or be taken right after.
func (ls *Leases) Holders(ctx context.Context, hashKey string) ([]Holder, error) {
	if err := luakit.ValidateKey("hash key", hashKey); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if err := ls.require(ctx); err != nil {
		return nil, err
	}
	arr, err := holdersScript.Exec(ctx, ls.client, []string{ls.cfg.keys.Key(hashKey)}, nil).ToArray()
	if err != nil {
		return nil, fmt.Errorf("lease: holders: %w", err)
	}
	return decodeHolders(arr)
}

// decodeHolders turns the holders script's flat {field, pttl, ...} reply into Holders sorted by field.
func decodeHolders(arr []rueidis.RedisMessage) ([]Holder, error) {
	if len(arr)%2 != 0 {
		return nil, fmt.Errorf("lease: holders: odd reply of %d elements", len(arr))
	}
	out := make([]Holder, 0, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		f, err := arr[i].ToString()
		if err != nil {
			return nil, fmt.Errorf("lease: holders: field: %w", err)
		}
		ms, err := arr[i+1].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("lease: holders: pttl: %w", err)
		}
		rem := time.Duration(-1)
		if ms >= 0 {
			rem = time.Duration(ms) * time.Millisecond
		}
		out = append(out, Holder{Field: f, Remaining: rem})
	}
	slices.SortFunc(out, func(a, b Holder) int { return strings.Compare(a.Field, b.Field) })
	return out, nil
}

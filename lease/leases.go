package lease

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

// Leases takes named leases, each one field of a Redis hash with its own expiry, through one rueidis
// client. Create it with [New]; it is safe for concurrent use by many goroutines and runs no background
// goroutines of its own except its leases' keep-alive scheduler (one timer goroutine while any Lease
// keeps alive, at most 64 renewals in flight, whatever the number of leases). The zero value is not
// usable.
//
// A Leases probes the server for hash-field expiry once, on its first I/O, and caches a definite answer
// (a failed probe is retried on the next call). Share a Leases between goroutines rather than creating
// one per call. It never closes or reconfigures the caller's client.
type Leases struct {
	client   rueidis.Client
	cfg      config // cfg.own is the ownership.Config of every Lease of this Leases
	waiter   ownership.Waiter
	features luakit.FeatureCache
}

// New returns a Leases over client. It does no I/O. It fails with an error wrapping [ErrNilClient] for
// a nil client and with an error matching [ErrInvalidConfig] for an invalid option; nil options are
// ignored.
func New(client rueidis.Client, opts ...Option) (*Leases, error) {
	if client == nil {
		return nil, fmt.Errorf("lease: %w", ErrNilClient)
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
	ls := &Leases{client: client, cfg: cfg}
	// Other fields keep the hash key in place when a lease is released.
	ls.waiter = ownership.Waiter{Client: client, Tracker: cfg.tracker, Config: &ls.cfg.own, KeyPersists: true}
	return ls, nil
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
		return "", 0, fmt.Errorf("lease: %w: must be at least 1ms (got %v)", ErrInvalidTTL, ttl)
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

// newLease returns an unstarted Lease with a fresh owner token, for one or more attempts.
func (ls *Leases) newLease(key, hashKey, field string, ms int64) *Lease {
	owner := luakit.OwnerToken()
	l := &Lease{
		b: backend{
			client: ls.client,
			cfg:    &ls.cfg.own,
			keys:   [1]string{key},
			args:   [3]string{field, owner, strconv.FormatInt(ms, 10)},
			ms:     ms,
		},
		hashKey: hashKey,
	}
	l.b.own = &l.own
	return l
}

// TryAcquire makes one attempt to take the named lease field in the hash at hashKey, and returns at
// once. ttl is truncated to whole milliseconds and must be at least 1ms; the hash key (prefixed) and
// the field are binary-safe and non-empty; bad input fails before any I/O. The first call of a Leases
// probes the server for hash-field expiry (one extra round trip, then cached).
//
// It returns the held [*Lease], or an error wrapping: [ErrNotAcquired] (another owner holds the
// field), [ErrExpiringHash] (the hash key has a key-level expiry) or luakit.ErrUnsupported (no
// hash-field expiry: Redis before 7.4, Valkey before 9.0), all with nothing written; [ErrLateReply];
// ctx.Err() when ctx had already ended (nothing sent); [ErrUncertain] when no reply was read; or a
// server or connection error ([luakit.Classify]). After a late, uncertain or unknown-kind outcome an
// owner-checked release is sent as the ownership contract says (bounded by [WithCleanupTimeout]).
func (ls *Leases) TryAcquire(ctx context.Context, hashKey, field string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := ls.cfg.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	v, err := ls.tryAcquire(ctx, hashKey, field, ttl)
	endAcquire(&sc, err)
	return v, err
}

// tryAcquire is [Leases.TryAcquire], run inside its hook scope.
func (ls *Leases) tryAcquire(ctx context.Context, hashKey, field string, ttl time.Duration) (_ *Lease, err error) {
	key, ms, err := ls.validate(hashKey, field, ttl)
	if err != nil {
		return nil, err
	}
	if err = ls.require(ctx); err != nil {
		return nil, err
	}
	l := ls.newLease(key, hashKey, field, ms)
	if a := ls.cfg.own.Try(ctx, "acquire", &l.b); a.Err != nil {
		return nil, a.Err
	}
	return l, nil
}

// Acquire takes the named lease like [Leases.TryAcquire], waiting while another owner holds the field.
//
// It waits as the contract's waiting acquisition does, on the hash key: it wakes when the hash key is
// invalidated (on a client built by [luakit.NewTrackedClient], or with [WithTracker]) and at the held
// field's HPTTL deadline, then retries the atomic script; only the script grants ownership. Waiters
// watch the whole hash, so a change to any field wakes every waiter on that hash for another attempt.
// While waiting it sends no commands. Transient server errors, connections that could not be made
// (nothing sent, [luakit.NotSent]), late replies and uncertain attempts whose owner-checked cleanup was
// answered are retried after the retry delay; other errors (including
// [ErrExpiringHash] and the unsupported-server error) end the wait.
//
// It blocks until the lease is acquired, ctx ends, or a non-retryable error occurs. When ctx ends it
// returns an error wrapping ctx.Err() (and [ErrUncertain] if an attempt was in flight; its cleanup is
// sent). Cancellation does not undo an acquisition the server already applied.
func (ls *Leases) Acquire(ctx context.Context, hashKey, field string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := ls.cfg.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	v, err := ls.acquire(ctx, hashKey, field, ttl)
	sc.End(err)
	return v, err
}

// acquire is [Leases.Acquire], run inside its hook scope.
func (ls *Leases) acquire(ctx context.Context, hashKey, field string, ttl time.Duration) (_ *Lease, err error) {
	key, ms, err := ls.validate(hashKey, field, ttl)
	if err != nil {
		return nil, err
	}
	var l, got *Lease
	err = ls.waiter.Wait(ctx, key, func(ctx context.Context) ownership.TryResult {
		// The probe answer is cached once definite; a probe that could not reach the server (a
		// refused connection) is retried like any transient failure.
		if err := ls.require(ctx); err != nil {
			return ownership.TryResult{Retry: luakit.IsTransient(err), Err: err}
		}
		if l == nil {
			l = ls.newLease(key, hashKey, field, ms)
		}
		a := ls.cfg.own.Try(ctx, "acquire", &l.b)
		switch {
		case a.Err == nil:
			got = l
		case !a.Busy:
			l = nil // the token may have reached the server: the next attempt gets a fresh one
		}
		return a // busy: nothing written, the next attempt keeps the token
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// endAcquire completes an acquisition's hook scope: a held field is an answer, not a failure.
func endAcquire(sc *luakit.Scope, err error) {
	if errors.Is(err, ErrNotAcquired) {
		sc.EndWith(luakit.OutcomeSucceeded, err)
		return
	}
	sc.End(err)
}

package rwlock

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

// Mode is the kind of a lease: [Read] (shared) or [Write] (exclusive).
type Mode int

const (
	// Read is a shared lease: any number of readers may hold the key at once, while no writer does.
	Read Mode = iota + 1
	// Write is an exclusive lease: granted only while nobody, reader or writer, holds the key.
	Write
)

// String returns "read" or "write" ("Mode(n)" otherwise).
func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// op is the operation name in the mode's acquisition errors.
func (m Mode) op() string {
	if m == Write {
		return "acquire write"
	}
	return "acquire read"
}

// tag is the entry prefix of the mode in the sorted set ("r" or "w").
func (m Mode) tag() string {
	if m == Write {
		return "w"
	}
	return "r"
}

// Locker takes read and write leases through one rueidis client. Create it with [New]; it is safe for
// concurrent use by many goroutines and owns no goroutines except its leases' keep-alive scheduler
// (one timer goroutine while any lease keeps alive, at most 64 renewals in flight, whatever the
// number of leases). The zero value is not usable.
//
// A Locker never closes or reconfigures the caller's client.
type Locker struct {
	client rueidis.Client
	cfg    config
	waiter ownership.Waiter
}

// New returns a Locker over client. It does no I/O. It fails with an error wrapping [ErrNilClient]
// for a nil client and with an error matching [ErrInvalidConfig] for an invalid option.
func New(client rueidis.Client, opts ...Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("rwlock: %w", ErrNilClient)
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
	l := &Locker{client: client, cfg: cfg}
	l.waiter.Client, l.waiter.Tracker, l.waiter.Config = client, cfg.tracker, &l.cfg.own
	l.waiter.KeyPersists = true // other holders keep the sorted set in place when one releases
	return l, nil
}

// TryAcquireRead makes one attempt to take a shared read lease on key and returns at once: it succeeds
// unless an unexpired writer holds the key. Arguments, results and errors are those of
// [Locker.TryAcquireWrite]; [Locker.AcquireRead] waits instead.
func (l *Locker) TryAcquireRead(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.cfg.own.Begin(ctx, "TRY ACQUIRE READ")
	if err != nil {
		return nil, err
	}
	v, err := l.tryAcquire(ctx, Read, key, ttl)
	endAcquire(&sc, err)
	return v, err
}

// TryAcquireWrite makes one attempt to take the exclusive write lease on key and returns at once: it
// succeeds only when no unexpired reader or writer holds the key. [Locker.AcquireWrite] waits instead.
// key is binary-safe, prefixed and non-empty (use a key dedicated to this package); ttl is truncated
// to whole milliseconds and must be at least 1ms; bad input fails before any I/O.
//
// It returns the held [*Lease], or [ErrNotAcquired] when a conflicting holder has the key (nothing
// written), or the errors of the ownership contract's acquisition rows (package
// github.com/coordkit/coordkit/luakit/ownership): [ErrLateReply], [ErrUncertain], ctx's error, a
// server or connection error (WRONGTYPE for a key of another type), each with its owner-checked
// release bounded by [WithCleanupTimeout] where the contract sends one. ctx bounds the round trip.
func (l *Locker) TryAcquireWrite(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.cfg.own.Begin(ctx, "TRY ACQUIRE WRITE")
	if err != nil {
		return nil, err
	}
	v, err := l.tryAcquire(ctx, Write, key, ttl)
	endAcquire(&sc, err)
	return v, err
}

// AcquireRead takes a shared read lease on key like [Locker.TryAcquireRead], waiting while a writer
// holds it. Waiting is that of [Locker.AcquireWrite].
func (l *Locker) AcquireRead(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.cfg.own.Begin(ctx, "ACQUIRE READ")
	if err != nil {
		return nil, err
	}
	v, err := l.acquire(ctx, Read, key, ttl)
	sc.End(err)
	return v, err
}

// AcquireWrite takes the exclusive write lease on key like [Locker.TryAcquireWrite], waiting while any
// reader or a writer holds it, as the ownership contract's waiting acquisition does: it sleeps until
// the key changes (an invalidation, with tracking) or the conflicting entries would expire, retries
// transient failures after [WithRetryDelay], and returns other errors as TryAcquireWrite does. When
// ctx ends it returns an error wrapping ctx.Err() (and [ErrUncertain] if an attempt was in flight; its
// cleanup was sent).
//
// There is no queue and no fairness: readers keep being admitted while a writer waits, so overlapping
// readers can keep a waiting writer out for as long as they overlap (see the package documentation).
// Bound the wait with ctx.
func (l *Locker) AcquireWrite(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.cfg.own.Begin(ctx, "ACQUIRE WRITE")
	if err != nil {
		return nil, err
	}
	v, err := l.acquire(ctx, Write, key, ttl)
	sc.End(err)
	return v, err
}

// prepare validates the request before any I/O and returns the physical key and the TTL in ms.
func (l *Locker) prepare(key string, ttl time.Duration) (string, int64, error) {
	if err := luakit.ValidateKey("key", key); err != nil {
		return "", 0, fmt.Errorf("rwlock: %w", err)
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return "", 0, fmt.Errorf("rwlock: acquire: %w (got %v, want at least 1ms)", ErrInvalidTTL, ttl)
	}
	return l.cfg.keys.Key(key), ms, nil
}

func (l *Locker) tryAcquire(ctx context.Context, mode Mode, key string, ttl time.Duration) (*Lease, error) {
	physical, ms, err := l.prepare(key, ttl)
	if err != nil {
		return nil, err
	}
	h := l.newLease(mode, key, physical, ms)
	if a := l.cfg.own.Try(ctx, mode.op(), &h.b); a.Err != nil {
		return nil, a.Err
	}
	return h, nil
}

func (l *Locker) acquire(ctx context.Context, mode Mode, key string, ttl time.Duration) (*Lease, error) {
	physical, ms, err := l.prepare(key, ttl)
	if err != nil {
		return nil, err
	}
	var lease *Lease
	err = l.waiter.Wait(ctx, physical, func(ctx context.Context) ownership.TryResult {
		h := l.newLease(mode, key, physical, ms) // a fresh owner token for every attempt
		a := l.cfg.own.Try(ctx, mode.op(), &h.b)
		if a.Err == nil {
			lease = h
		}
		return a
	})
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// newLease makes the Lease that one acquisition attempt grants, with a fresh owner token.
func (l *Locker) newLease(mode Mode, key, physical string, ms int64) *Lease {
	h := &Lease{mode: mode, key: key}
	h.b = backend{client: l.client, cfg: &l.cfg.own, own: &h.own, key: physical, entry: mode.tag() + ":" + luakit.OwnerToken(), ms: ms}
	return h
}

// endAcquire completes an acquisition's hook scope: ErrNotAcquired is an answer, not a failure.
func endAcquire(sc *luakit.Scope, err error) {
	if errors.Is(err, ErrNotAcquired) {
		sc.EndWith(luakit.OutcomeSucceeded, err)
		return
	}
	sc.End(err)
}

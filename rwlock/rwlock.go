package rwlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Mode is the kind of a lease: [Read] (shared) or [Write] (exclusive).
type Mode int

const (
	// Read is a shared lease: any number of readers may hold the key at once, while no writer does.
	Read Mode = iota + 1
	// Write is an exclusive lease: granted only while nobody, reader or writer, holds the key.
	Write
)

// String returns "read" or "write".
func (m Mode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// tag is the entry prefix of the mode in the sorted set ("r" or "w").
func (m Mode) tag() string {
	if m == Write {
		return "w"
	}
	return "r"
}

// Locker takes read and write leases through one rueidis client. Create it with [New]; it is safe for
// concurrent use by many goroutines and owns no goroutines. The zero value is not usable.
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

// TryAcquireRead makes one attempt to take a shared read lease on key and returns at once: it succeeds
// unless an unexpired writer holds the key. It does not queue, poll or wait; see the package
// documentation for writer starvation. Arguments, results and errors are those of
// [Locker.TryAcquireWrite].
func (l *Locker) TryAcquireRead(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	return l.tryAcquire(ctx, Read, key, ttl)
}

// TryAcquireWrite makes one attempt to take the exclusive write lease on key and returns at once: it
// succeeds only when no unexpired reader or writer holds the key. It does not queue, poll or wait; bound
// retries with backoff (see the example).
//
// key is binary-safe, gets the Locker's prefix and must be non-empty; use a key dedicated to this
// package. ttl is the lease duration, truncated to whole milliseconds; it must be at least 1ms. Invalid
// input fails before any I/O.
//
// It returns the held [*Lease] on success. Otherwise it returns a nil Lease and:
//   - [ErrNotAcquired] when a conflicting holder has the key (nothing written);
//   - [ErrLateReply] when the grant arrived after the local estimate elapsed (an owner-checked release
//     was attempted);
//   - an error wrapping [ErrUncertain] and the cause (such as ctx.Err()) when the script may have run
//     but no reply was read: an owner-checked release bounded by the cleanup timeout
//     ([WithCleanupTimeout]) was attempted even if ctx is cancelled, and otherwise the entry expires
//     after ttl; the acquisition is never replayed;
//   - a server or connection error, classified by [luakit.Classify] (a key holding another Redis type
//     fails with WRONGTYPE).
//
// ctx bounds the round trip. It blocks for at most one round trip plus, after an uncertain or late
// outcome, the cleanup timeout.
func (l *Locker) TryAcquireWrite(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	return l.tryAcquire(ctx, Write, key, ttl)
}

func (l *Locker) tryAcquire(ctx context.Context, mode Mode, key string, ttl time.Duration) (*Lease, error) {
	if err := luakit.ValidateKey("key", key); err != nil {
		return nil, fmt.Errorf("rwlock: %w", err)
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return nil, fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl)
	}
	owner, err := luakit.NewOwnerToken()
	if err != nil {
		return nil, fmt.Errorf("rwlock: owner token: %w", err)
	}
	physical := l.cfg.keys.Key(key)
	entry := mode.tag() + ":" + owner

	start := time.Now()
	arr, err := acquireScript.Exec(ctx, l.client, []string{physical},
		[]string{mode.tag(), owner, strconv.FormatInt(ms, 10)}).ToArray()
	if err != nil {
		if luakit.IsUncertain(err) {
			l.cleanup(ctx, physical, entry)
			return nil, fmt.Errorf("%w: acquire %s: %w", ErrUncertain, mode, err)
		}
		return nil, fmt.Errorf("rwlock: acquire %s: %w", mode, err)
	}
	if len(arr) != 2 {
		return nil, fmt.Errorf("rwlock: acquire %s: unexpected reply of %d elements", mode, len(arr))
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("rwlock: acquire %s: status: %w", mode, err)
	}
	switch status {
	case 1:
		d := time.Duration(ms) * time.Millisecond
		deadline := start.Add(d)
		if !time.Now().Before(deadline) {
			l.cleanup(ctx, physical, entry)
			return nil, ErrLateReply
		}
		return newLease(l, mode, key, physical, owner, entry, d, deadline), nil
	case 0:
		return nil, ErrNotAcquired
	}
	return nil, fmt.Errorf("rwlock: acquire %s: unexpected status %d", mode, status)
}

// cleanup sends a bounded owner-checked release that survives the caller's cancellation and reports
// whether the server answered it. It may not reach the server at all, and when it travels on another
// connection than the uncertain command a delayed acquisition can still land after it; the entry then
// expires after its TTL.
func (l *Locker) cleanup(ctx context.Context, physical, entry string) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.cleanupTimeout)
	defer cancel()
	err := releaseScript.Exec(cctx, l.client, []string{physical}, []string{entry}).Error()
	if err != nil {
		l.cfg.logger.Warn("rwlock: owner-checked cleanup failed; the entry, if written, expires after its TTL",
			slog.String("error", err.Error()))
		return false
	}
	return true
}

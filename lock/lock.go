package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	client     rueidis.Client
	keys       luakit.Keyspace
	checkSlots bool                        // the two-key form checks slots: a Cluster client, or WithStrictSlots
	own        ownership.Config            // shared by every Lease of this Locker
	waiter     ownership.Waiter            // Acquire's waiting loop; warns once per Locker without working tracking
	cond       *luakit.ConditionalCommands // probed once per Locker; nil with WithConditionalCommands(false)

}

// New returns a Locker over client. It does no I/O. It fails with an error wrapping [ErrNilClient] for
// a nil client and with an error matching [ErrInvalidConfig] for an invalid option.
func New(client rueidis.Client, opts ...Option) (*Locker, error) {
	l, _, err := newLocker(client, opts)
	return l, err
}

// newLocker is New, also returning the applied configuration (NewFair reads its wait slice).
func newLocker(client rueidis.Client, opts []Option) (*Locker, config, error) {
	if client == nil {
		return nil, config{}, fmt.Errorf("lock: %w", ErrNilClient)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, config{}, err
		}
	}
	l := &Locker{
		client:     client,
		keys:       cfg.keys,
		checkSlots: cfg.strictSlots || client.Mode() == rueidis.ClientModeCluster,
		own:        cfg.own,
	}
	if cfg.conditional {
		l.cond = new(luakit.ConditionalCommands)
	}
	l.waiter = ownership.Waiter{Client: client, Tracker: cfg.tracker, Config: &l.own} // re-checks every 1s without expiry or tracking
	return l, cfg, nil
}

// Keys returns the lease key and the fence key of the lock named name, as [Locker.TryAcquire] and
// [Locker.Acquire] derive them, before the key prefix: "{" + name + "}:lease" and
// "{" + name + "}:fence". The braces are a Cluster hash tag, so both keys hash to one slot; see the
// package documentation (# Keys) for a name that contains braces. Keys does no validation: use it to
// find a lock's keys (inspection, ACL key patterns) or to move a named lock to [Locker.TryAcquireKeys].
func Keys(name string) (leaseKey, fenceKey string) {
	return "{" + name + "}:lease", "{" + name + "}:fence"
}

// request is one validated acquisition: the keys as the caller gave or the Locker derived them, the
// acquire script's KEYS and ARGV, and the TTL in whole milliseconds. Every string of a request is a
// slice of one buffer, built once per call, so that a call costs one allocation for all of them.
type request struct {
	name               string    // the one-name form's name; "" for the two-key form
	leaseKey, fenceKey string    // without the key prefix
	keys               [2]string // KEYS: the physical lease key and fence key
	args               [3]string // ARGV: the next attempt's owner token, the TTL in ms, and "1" (lease first)
	fresh              bool      // args[0] is a token no attempt has sent yet
	ms                 int64
}

// lease and fence return the physical keys.
func (r *request) lease() string { return r.keys[0] }
func (r *request) fence() string { return r.keys[1] }

// named validates a one-name acquisition before any I/O. The derived keys are checked for one slot on
// every client: the derivation promises it, and only a name starting with '}' (or a prefix whose first
// braces are empty) can break it.
func (l *Locker) named(name string, ttl time.Duration) (request, error) {
	if err := luakit.ValidateKey("name", name); err != nil {
		return request{}, luakit.InvalidConfigOf("lock", err, "")
	}
	return l.prepare(request{name: name}, "{", "}:lease", "}:fence", name, name, ttl, true)
}

// explicit validates a two-key acquisition before any I/O; slots are checked on a Cluster client or
// with WithStrictSlots.
func (l *Locker) explicit(leaseKey, fenceKey string, ttl time.Duration) (request, error) {
	if err := luakit.ValidateKey("lease key", leaseKey); err != nil {
		return request{}, luakit.InvalidConfigOf("lock", err, "")
	}
	if err := luakit.ValidateKey("fence key", fenceKey); err != nil {
		return request{}, luakit.InvalidConfigOf("lock", err, "")
	}
	return l.prepare(request{}, "", "", "", leaseKey, fenceKey, ttl, l.checkSlots)
}

// prepare checks the TTL and builds r's strings in one buffer: the lease key open + leaseName +
// leaseClose and the fence key open + fenceName + fenceClose (each after the key prefix), a fresh owner
// token and the TTL in ms; then it checks the physical keys, all before any I/O.
func (l *Locker) prepare(r request, open, leaseClose, fenceClose, leaseName, fenceName string, ttl time.Duration, checkSlots bool) (request, error) {
	r.ms = ttl.Milliseconds()
	if r.ms < 1 {
		return request{}, fmt.Errorf("lock: %w: a lease needs at least 1ms (got %v)", ErrInvalidTTL, ttl)
	}
	var digits [20]byte
	ms := strconv.AppendInt(digits[:0], r.ms, 10)
	prefix := l.keys.Prefix()
	leaseLen := len(prefix) + len(open) + len(leaseName) + len(leaseClose)
	fenceLen := len(prefix) + len(open) + len(fenceName) + len(fenceClose)
	var b strings.Builder
	b.Grow(leaseLen + fenceLen + luakit.OwnerTokenLen + len(ms))
	for _, part := range [...]string{prefix, open, leaseName, leaseClose, prefix, open, fenceName, fenceClose} {
		b.WriteString(part)
	}
	luakit.WriteOwnerToken(&b)
	b.Write(ms)
	buf := b.String()
	r.keys[0], r.keys[1] = buf[:leaseLen], buf[leaseLen:leaseLen+fenceLen]
	r.leaseKey, r.fenceKey = r.keys[0][len(prefix):], r.keys[1][len(prefix):]
	r.args[0], r.args[1] = buf[leaseLen+fenceLen:leaseLen+fenceLen+luakit.OwnerTokenLen], buf[leaseLen+fenceLen+luakit.OwnerTokenLen:]
	r.fresh = true
	if r.keys[0] == r.keys[1] {
		return request{}, ErrSameKey
	}
	if checkSlots && luakit.Slot(r.keys[0]) != luakit.Slot(r.keys[1]) {
		if err := luakit.CheckSameSlot(
			luakit.NamedKey{Role: "lease key", Key: r.keys[0]},
			luakit.NamedKey{Role: "fence key", Key: r.keys[1]},
		); err != nil {
			return request{}, luakit.InvalidConfigOf("lock", err, "")
		}
	}
	return r, nil
}

// TryAcquire makes one attempt to take the lock named name, issuing the next fencing token from its
// counter, and returns at once. Its two keys are derived from name ([Keys]; the package
// documentation's Keys section); [Locker.TryAcquireKeys] takes an existing layout's. ttl is truncated
// to whole milliseconds and must be at least 1ms; bad input fails before any I/O ([ErrInvalidConfig]).
//
// It returns the held [*Lease], or: [ErrNotAcquired] (another owner holds it; nothing written); a
// [*CounterError] (nothing written); [ErrLateReply] (granted too late; released, the counter
// advanced); an error wrapping [ErrUncertain] when no reply was read (an owner-checked release was
// sent behind it); a server or connection error ([luakit.Classify]; after one of unknown kind the
// release is sent too). ctx bounds the round trip; cancelling does not undo an applied acquisition. A
// slot migration's TRYAGAIN is retried within ctx for up to [luakit.TryAgainBudget].
func (l *Locker) TryAcquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	r, err := l.named(name, ttl)
	var lease *Lease
	if err == nil {
		lease, err = l.tryOnce(ctx, &r)
	}
	endAcquire(&sc, err)
	return lease, err
}

// endAcquire completes an acquisition's hook scope: a busy lock is an answer, not a failure.
func endAcquire(sc *luakit.Scope, err error) {
	if errors.Is(err, ErrNotAcquired) {
		sc.EndWith(luakit.OutcomeSucceeded, err)
		return
	}
	sc.End(err)
}

// TryAcquireKeys is [Locker.TryAcquire] for a lock whose two keys are given: the lease at leaseKey,
// with fencing tokens from the counter at fenceKey. Use it for an existing key layout.
//
// Both keys are binary-safe, get the Locker's prefix, must be non-empty and must differ ([ErrSameKey]).
// A Cluster server rejects two keys in different slots, so on a Cluster client, and on every client
// with [WithStrictSlots], they must hash to one slot (a common hash tag, "{invoice:42}:lease" /
// "{invoice:42}:fence") or the call fails with a [*luakit.CrossSlotError]. All of it is checked before
// any I/O, with errors matching [ErrInvalidConfig]. Results are as for TryAcquire.
func (l *Locker) TryAcquireKeys(ctx context.Context, leaseKey, fenceKey string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	r, err := l.explicit(leaseKey, fenceKey, ttl)
	var lease *Lease
	if err == nil {
		lease, err = l.tryOnce(ctx, &r)
	}
	endAcquire(&sc, err)
	return lease, err
}

// tryOnce is a try-acquisition of a validated request: one attempt, its error returned.
func (l *Locker) tryOnce(ctx context.Context, r *request) (*Lease, error) {
	h := l.newLease(r)
	if a := l.attempt(ctx, h); a.Err != nil {
		return nil, a.Err
	}
	return h, nil
}

// attempt runs the acquire script once for h (the Lease it grants, reused by a waiting Acquire's
// attempts) through the ownership core, which decides what the reply means. Every attempt after the
// first gets an owner token of its own.
func (l *Locker) attempt(ctx context.Context, h *Lease) ownership.TryResult {
	if !h.b.r.fresh {
		h.b.r.args[0] = luakit.OwnerToken()
	}
	h.b.r.fresh = false
	return l.own.Try(ctx, "acquire", &h.b)
}

// Acquire takes the lock named name like [Locker.TryAcquire] (same keys, same validation), waiting
// while another owner holds it, as the ownership contract's waiting rows say (package
// github.com/coordkit/coordkit/luakit/ownership): it sleeps until the lease key is invalidated or the
// holder's PTTL passes, then retries the script, sending nothing while it sleeps. On a client from
// [luakit.NewTrackedClient] it wakes on invalidations ([WithTracker] overrides the tracker); without
// working tracking it logs one warning per Locker and wakes only at the holder's PTTL.
//
// Transient errors, refused connections, late grants and uncertain attempts whose cleanup was answered
// are retried after the retry delay; other errors end the wait. When ctx ends it returns an error
// wrapping ctx.Err() (and [ErrUncertain] if an attempt was in flight; its cleanup is sent).
// Cancellation does not undo an acquisition the server already applied.
func (l *Locker) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	r, err := l.named(name, ttl)
	var lease *Lease
	if err == nil {
		lease, err = l.wait(ctx, &r)
	}
	sc.End(err)
	return lease, err
}

// AcquireKeys is [Locker.Acquire] for a lock whose two keys are given, validated as by
// [Locker.TryAcquireKeys].
func (l *Locker) AcquireKeys(ctx context.Context, leaseKey, fenceKey string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := l.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	r, err := l.explicit(leaseKey, fenceKey, ttl)
	var lease *Lease
	if err == nil {
		lease, err = l.wait(ctx, &r)
	}
	sc.End(err)
	return lease, err
}

// wait is Acquire's loop for a validated request.
func (l *Locker) wait(ctx context.Context, r *request) (*Lease, error) {
	h := l.newLease(r)
	// The first attempt arms tracking of the lease key with its own read when the lock is busy, so
	// the waiter sleeps without an arming round trip; later attempts, most often sent because the
	// key just changed, go without and arm separately when still busy.
	h.b.track = l.waiter.Tracking()
	err := l.waiter.Wait(ctx, h.b.r.lease(), func(ctx context.Context) ownership.TryResult {
		a := l.attempt(ctx, h)
		h.b.track = false
		return a
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

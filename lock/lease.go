package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit/ownership"
)

// ReleaseOutcome is the result of [Lease.Release]: the shared [ownership.Outcome], so outcomes compare
// equal across Coordkit's primitives. The zero value is not an outcome: Release returns it only with an
// error.
type ReleaseOutcome = ownership.Outcome

// The release outcomes (see [ownership.Outcome]).
const (
	Released        = ownership.Released        // this call removed this owner's lease
	AlreadyReleased = ownership.AlreadyReleased // an earlier answered release on this handle settled it
	NotOwned        = ownership.NotOwned        // the server held no lease of this owner
)

// Lease is a held fenced lease: the owner token that guards renewal and release, and the fencing token
// that the protected resource must check. Its methods Extend, ExtendTTL, KeepAlive, Verify, Release,
// Close, Done, Context, Err, Remaining, Deadline and TTL behave exactly as the contract in package
// github.com/coordkit/coordkit/luakit/ownership states: the local estimate runs from just before the
// acquiring (or last renewing) script was sent, and Done and Context end when it elapses, when the
// server reports the lease lost, or when a release is sent.
//
// What is particular to a lock: renewals never change the fencing token, Release never touches the
// fence counter, and every lease has an expiry (ExtendTTL takes whole milliseconds, at least 1ms, and
// fails with [ErrInvalidTTL] before any I/O otherwise). Its methods are safe for concurrent use. Leases
// are made by [Locker.TryAcquire], [Locker.Acquire] and their two-key forms; the zero value is not
// usable.
type Lease struct {
	own                      ownership.Handle
	b                        backend
	name, leaseKey, fenceKey string
	token                    int64
}

//go:generate go run ../tools/cmd/handlegen -type Lease -noun lease

// backend sends a lease's owner-checked scripts for the Handle. Its key and owner are one-element
// arrays so the scripts' KEYS and ARGV slices need no allocation per call (rueidis copies them).
type backend struct {
	client rueidis.Client
	key    [1]string // the physical lease key
	owner  [1]string // the owner token
}

// Extend sends the extend script: PEXPIRE at ttl for this owner only.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return false, fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl) // PEXPIRE 0 would delete the lease; the Handle checks first
	}
	n, err := extendScript.ExecOrdered(ctx, b.client, b.key[:], []string{b.owner[0], strconv.FormatInt(ms, 10)}).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeExtend(n)
}

// Verify sends the verify script (read-only).
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.client, b.key[:], b.owner[:]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeVerify(n)
}

// Release sends the release script: DEL for this owner only; the counter is never touched.
func (b *backend) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.ExecOrdered(ctx, b.client, b.key[:], b.owner[:]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeRelease(n)
}

// decodeExtend reads extend.lua's reply: 1 renewed, 0 not this owner's.
func decodeExtend(n int64) (bool, error) {
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, fmt.Errorf("unexpected extend reply %d", n)
}

// decodeVerify reads verify.lua's reply: the lease's PTTL (>= 0, or -1 without expiry) when held, -2
// when not this owner's.
func decodeVerify(n int64) (bool, error) {
	switch {
	case n >= -1:
		return true, nil
	case n == -2:
		return false, nil
	}
	return false, fmt.Errorf("unexpected verify reply %d", n)
}

// decodeRelease reads release.lua's reply: 1 deleted, 0 absent, -1 held by another owner.
func decodeRelease(n int64) (bool, error) {
	switch n {
	case 1:
		return true, nil
	case 0, -1:
		return false, nil
	}
	return false, fmt.Errorf("unexpected release reply %d", n)
}

// FencingToken returns the positive fencing token issued for this lease (exact for every int64). Send it
// with every protected write; the resource must reject tokens lower than the highest it has accepted.
// Renewals never change it.
func (h *Lease) FencingToken() int64 { return h.token }

// OwnerToken returns the random 128-bit owner token (32 hex characters) that guards renewal and release.
// Keep it private: never log it or use it as a metric attribute.
func (h *Lease) OwnerToken() string { return h.b.owner[0] }

// Name returns the lock's name as given to [Locker.TryAcquire] or [Locker.Acquire], or "" for a lease
// taken with [Locker.TryAcquireKeys] or [Locker.AcquireKeys].
func (h *Lease) Name() string { return h.name }

// LeaseKey returns the lease key without the key prefix: as derived from the name ("{name}:lease", see
// [Keys]) or as given to TryAcquireKeys / AcquireKeys.
func (h *Lease) LeaseKey() string { return h.leaseKey }

// FenceKey returns the fence (counter) key without the key prefix: as derived from the name
// ("{name}:fence") or as given to TryAcquireKeys / AcquireKeys.
func (h *Lease) FenceKey() string { return h.fenceKey }

// grant makes the Lease of an acquisition of owner that the server granted, sent at start with ttl
// (whole milliseconds). It returns [ErrLateReply] (after the owner-checked cleanup) when the reply came
// after the local estimate elapsed.
func (l *Locker) grant(ctx context.Context, r *request, owner string, token int64, start time.Time, ttl time.Duration) (*Lease, error) {
	h := &Lease{name: r.name, leaseKey: r.leaseKey, fenceKey: r.fenceKey, token: token}
	h.b.client, h.b.key[0], h.b.owner[0] = l.client, r.lease(), owner
	if err := h.own.Grant(ctx, &h.b, &l.own, start, ttl); err != nil {
		return nil, err
	}
	return h, nil
}

// Compile-time check: the backend is what the Handle needs.
var _ ownership.Backend = (*backend)(nil)

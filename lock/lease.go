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
	own ownership.Handle
	b   backend
}

//go:generate go run ../tools/cmd/handlegen -type Lease -noun lease

// backend is a Lease's side of the ownership core: its acquisition ([ownership.Acquirer]) and then its
// owner-checked scripts ([ownership.Backend]). Its request holds the keys and the owner token (r.keys[0]
// and r.args[0] are the lease key and the owner, sliced without allocation for the scripts' KEYS and
// ARGV; rueidis copies them).
type backend struct {
	client rueidis.Client
	cfg    *ownership.Config
	cond   *luakit.ConditionalCommands // the Locker's; nil with WithConditionalCommands(false)
	own    *ownership.Handle           // the Lease's
	r      request
	token  int64      // the fencing token, once granted
	track  bool       // the next attempt arms tracking of the lease key with its own read
	fair   *fairState // a FairLocker's lease: its scripts and keys; nil for a Locker's
}

// newLease makes the Lease that an acquisition of r grants (used by every attempt of one call).
func (l *Locker) newLease(r *request) *Lease {
	h := &Lease{b: backend{client: l.client, cfg: &l.own, cond: l.cond, r: *r}}
	h.b.own = &h.own
	return h
}

// SendAcquire sends the acquire script with the attempt's owner token; with track set, lease first, so
// that a held lock answers after one tracked read of the lease key.
func (b *backend) SendAcquire(ctx context.Context) ownership.Sent {
	if b.fair != nil {
		return b.sendFair(ctx)
	}
	if b.track {
		b.r.args[2] = "1"
		return b.cfg.SendTracked(ctx, acquireScript, b.client, b.r.keys[:], b.r.args[:])
	}
	return b.cfg.Send(ctx, acquireScript, b.client, b.r.keys[:], b.r.args[:2])
}

// DecodeAcquire reads acquire.lua's reply: the fencing token alone (an integer, or a decimal string
// above 2^53) when granted; the status row {busy, pttl} when held by another owner (pttl -1: no
// expiry); {counter, reason} for a counter that cannot issue tokens.
func (b *backend) DecodeAcquire(msg rueidis.RedisMessage) (ownership.Reply, error) {
	if b.fair != nil {
		return b.decodeFair(msg)
	}
	if !msg.IsArray() {
		return b.decodeToken(msg)
	}
	return b.decodeRow(msg)
}

// decodeToken reads a grant's fencing token (an integer, or a decimal string above 2^53).
func (b *backend) decodeToken(msg rueidis.RedisMessage) (ownership.Reply, error) {
	token, err := luakit.Int64(msg)
	if err != nil || token <= 0 {
		// Cannot happen with a validated counter; refuse to hand out a bad token.
		return ownership.Reply{}, fmt.Errorf("fencing token: %w", errors.Join(ErrCounter, err))
	}
	b.token = token
	return ownership.Reply{Granted: true}, nil
}

// decodeRow reads the status rows {busy, pttl} and {counter, reason}.
func (b *backend) decodeRow(msg rueidis.RedisMessage) (ownership.Reply, error) {
	status, v, err := ownership.Pair(msg)
	if err != nil {
		return ownership.Reply{}, err
	}
	switch status {
	case luakit.StatusBusy:
		pttl, err := v.AsInt64()
		if err != nil {
			return ownership.Reply{}, fmt.Errorf("pttl: %w", err)
		}
		return ownership.Reply{Busy: true, HolderTTL: max(time.Duration(pttl)*time.Millisecond, -1)}, nil
	case luakit.StatusCounter:
		reason, err := v.ToString()
		if err != nil {
			return ownership.Reply{}, fmt.Errorf("reason: %w", err)
		}
		return ownership.Reply{Err: &CounterError{Reason: CounterReason(reason)}}, nil
	}
	return ownership.Reply{}, fmt.Errorf("unexpected status %d", status)
}

// GrantAcquire starts the Lease's Handle for the grant of the attempt sent at start.
func (b *backend) GrantAcquire(ctx context.Context, start time.Time) error {
	return b.own.Grant(ctx, b, b.cfg, start, time.Duration(b.r.ms)*time.Millisecond)
}

// ReleaseAcquire is the attempt's owner-checked cleanup: Release for its owner token.
// A fair lease's attempt may have queued its owner, so its cleanup also removes the queue entry.
func (b *backend) ReleaseAcquire(ctx context.Context) (bool, error) {
	if b.fair != nil {
		return b.cancelWait(ctx)
	}
	return b.Release(ctx)
}

// Extend renews the lease at ttl for this owner only: SET key owner IFEQ owner PX ttl where the server
// has it (see the package documentation, "Conditional commands"), else the extend script (PEXPIRE).
// Both answer alike: true renewed; false absent or another owner's; WRONGTYPE for another type.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	arg, err := b.ttlArg(ttl)
	if err != nil {
		return false, err
	}
	if b.cond != nil {
		if held, ran, err := b.cond.Extend(ctx, b.client, b.r.keys[0], b.r.args[0], arg); ran {
			return held, err
		}
	}
	return b.extendScript(ctx, arg, luakit.ReplicaAck{})
}

// ExtendAcknowledged is Extend through the extend script followed by the acknowledgement ack
// ([ownership.Acknowledger]).
func (b *backend) ExtendAcknowledged(ctx context.Context, ttl time.Duration, ack luakit.ReplicaAck) (bool, error) {
	arg, err := b.ttlArg(ttl)
	if err != nil {
		return false, err
	}
	return b.extendScript(ctx, arg, ack)
}

// ttlArg returns a renewal's TTL argument in whole ms: the acquisition's own argument when ttl is the
// acquisition's TTL (no conversion), ErrInvalidTTL below 1ms (PEXPIRE 0 would delete the lease; the
// Handle checks first).
func (b *backend) ttlArg(ttl time.Duration) (string, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return "", fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl)
	}
	if ms == b.r.ms {
		return b.r.args[1], nil
	}
	return strconv.FormatInt(ms, 10), nil
}

// extendScript sends the extend script at ttlArg ms, acknowledged as ack says (zero: not).
func (b *backend) extendScript(ctx context.Context, ttlArg string, ack luakit.ReplicaAck) (bool, error) {
	resp, ackErr := extendScript.ExecOrderedAck(ctx, b.client, ack, b.r.keys[:1], []string{b.r.args[0], ttlArg})
	n, err := resp.AsInt64()
	if err != nil {
		return false, err
	}
	held, err := decodeExtend(n)
	if err != nil || !held {
		return held, err
	}
	return true, ackErr
}

// Verify sends the verify script (read-only).
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.client, b.r.keys[:1], b.r.args[:1]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeVerify(n)
}

// Release deletes the lease for this owner only: DELIFEQ (Valkey 9.0+) or DELEX IFEQ (Redis 8.4+)
// where the server has one (see the package documentation, "Conditional commands"), else the release
// script (DEL). Both answer alike; the counter is never touched.
func (b *backend) Release(ctx context.Context) (bool, error) {
	if b.fair != nil {
		return b.releaseFair(ctx) // hands the lease on: never a plain delete
	}
	if b.cond != nil {
		if deleted, ran, err := b.cond.Delete(ctx, b.client, b.r.keys[0], b.r.args[0]); ran {
			return deleted, err
		}
	}
	n, err := releaseScript.ExecOrdered(ctx, b.client, b.r.keys[:1], b.r.args[:1]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeRelease(n)
}

// decodeExtend reads extend.lua's status: 1 renewed; -1 absent or -2 another owner's: not this
// owner's.
func decodeExtend(n int64) (bool, error) { return decodeOwned("extend", n) }

// decodeVerify reads verify.lua's status: 1 this owner holds the lease; -1 absent or -2 another
// owner's: not this owner's.
func decodeVerify(n int64) (bool, error) { return decodeOwned("verify", n) }

// decodeRelease reads release.lua's status: 1 deleted; -1 absent or -2 held by another owner: not
// this owner's.
func decodeRelease(n int64) (bool, error) { return decodeOwned("release", n) }

// decodeOwned reads the status of an owner-checked script op: true for ok, false for absent or
// another owner's.
func decodeOwned(op string, n int64) (bool, error) {
	switch n {
	case luakit.StatusOK:
		return true, nil
	case luakit.StatusAbsent, luakit.StatusNotOwner:
		return false, nil
	}
	return false, fmt.Errorf("unexpected %s reply %d", op, n)
}

// FencingToken returns the positive fencing token issued for this lease (exact for every int64). Send it
// with every protected write; the resource must reject tokens lower than the highest it has accepted.
// Renewals never change it.
func (h *Lease) FencingToken() int64 { return h.b.token }

// OwnerToken returns the random 128-bit owner token (32 hex characters) that guards renewal and release.
// Keep it private: never log it or use it as a metric attribute.
func (h *Lease) OwnerToken() string { return h.b.r.args[0] }

// Name returns the lock's name as given to [Locker.TryAcquire] or [Locker.Acquire], or "" for a lease
// taken with [Locker.TryAcquireKeys] or [Locker.AcquireKeys].
func (h *Lease) Name() string { return h.b.r.name }

// LeaseKey returns the lease key without the key prefix: as derived from the name ("{name}:lease", see
// [Keys]) or as given to TryAcquireKeys / AcquireKeys.
func (h *Lease) LeaseKey() string { return h.b.r.leaseKey }

// FenceKey returns the fence (counter) key without the key prefix: as derived from the name
// ("{name}:fence") or as given to TryAcquireKeys / AcquireKeys.
func (h *Lease) FenceKey() string { return h.b.r.fenceKey }

// Compile-time checks: the backend is what the ownership core needs.
var (
	_ ownership.Backend  = (*backend)(nil)
	_ ownership.Acquirer = (*backend)(nil)
)

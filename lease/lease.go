package lease

import (
	"context"
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
	Released        = ownership.Released        // this call removed this owner's field
	AlreadyReleased = ownership.AlreadyReleased // an earlier answered release on this handle settled it
	NotOwned        = ownership.NotOwned        // the server held no field of this owner
)

// Lease is a held named lease: one field of a hash, holding this handle's random owner token, which
// guards renewal, verification and release. Its methods Extend, ExtendTTL, KeepAlive, Verify,
// Release, Close, Done, Context, Err, Remaining, Deadline and TTL behave as the contract in package
// github.com/coordkit/coordkit/luakit/ownership says. What is particular to a lease: those calls check
// the owner token stored in the field and touch no other field of the hash; ExtendTTL needs a TTL of
// at least 1ms ([ErrInvalidTTL] otherwise); and there is no fencing token, so Done and Context are the
// signals to stop protected work.
//
// Its methods are safe for concurrent use. Leases are made by [Leases.TryAcquire] and
// [Leases.Acquire]; the zero value is not usable.
type Lease struct {
	own     ownership.Handle
	b       backend
	hashKey string
}

//go:generate go run ../tools/cmd/handlegen -type Lease -noun lease

// backend sends a lease's owner-checked scripts for its ownership.Handle. keys and args are fixed at
// acquisition (args[2], the TTL of extend, changes only inside Extend, which the Handle runs one at a
// time), so renewals, checks and releases build no slices.
type backend struct {
	client rueidis.Client
	cfg    *ownership.Config
	own    *ownership.Handle // the Lease's
	keys   [1]string         // the physical hash key
	args   [3]string         // field, owner token, TTL in ms (the acquisition's, then the last Extend's)
	ms     int64             // the TTL in args[2]
}

// HashKey returns the hash key as given to the Leases (without the key prefix).
func (h *Lease) HashKey() string { return h.hashKey }

// Name returns the lease's name: its field in the hash.
func (h *Lease) Name() string { return h.b.args[0] }

// OwnerToken returns the random 128-bit owner token (32 hex characters) stored as the field's value; it
// guards renewal, verification and release. Keep it private: never log it or use it as a metric
// attribute.
func (h *Lease) OwnerToken() string { return h.b.args[1] }

// SendAcquire sends acquire.lua with the Lease's owner token.
func (b *backend) SendAcquire(ctx context.Context) ownership.Sent {
	return b.cfg.Send(ctx, acquireScript, b.client, b.keys[:], b.args[:])
}

// DecodeAcquire reads acquire.lua's status row: {ok, 0} granted; {busy, hpttl} held by another owner
// (-1: the field has no expiry); {mismatch, pttl} the hash has a key-level expiry (nothing written).
func (b *backend) DecodeAcquire(msg rueidis.RedisMessage) (ownership.Reply, error) {
	status, v, err := ownership.Pair(msg)
	if err != nil {
		return ownership.Reply{}, err
	}
	n, err := v.AsInt64()
	if err != nil {
		return ownership.Reply{}, fmt.Errorf("pttl: %w", err)
	}
	switch status {
	case luakit.StatusOK:
		return ownership.Reply{Granted: true}, nil
	case luakit.StatusBusy:
		return ownership.Reply{Busy: true, HolderTTL: max(time.Duration(n)*time.Millisecond, -1)}, nil
	case luakit.StatusMismatch:
		return ownership.Reply{Err: fmt.Errorf("%w (key PTTL %dms)", ErrExpiringHash, n)}, nil
	}
	return ownership.Reply{}, fmt.Errorf("unexpected status %d", status)
}

// GrantAcquire starts the Lease's Handle for the grant of the attempt sent at start.
func (b *backend) GrantAcquire(ctx context.Context, start time.Time) error {
	return b.own.Grant(ctx, b, b.cfg, start, time.Duration(b.ms)*time.Millisecond)
}

// ReleaseAcquire is the attempt's owner-checked cleanup: Release for its owner token.
func (b *backend) ReleaseAcquire(ctx context.Context) (bool, error) { return b.Release(ctx) }

// Extend runs extend.lua: it restarts the field's expiry at ttl if it holds this owner's token. The
// Handle passes only whole-millisecond TTLs of at least 1ms.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	if ms := ttl.Milliseconds(); ms != b.ms {
		b.args[2], b.ms = strconv.FormatInt(ms, 10), ms
	}
	return b.extend(ctx, luakit.ReplicaAck{})
}

// ExtendAcknowledged is Extend followed by the acknowledgement ack ([ownership.Acknowledger]).
func (b *backend) ExtendAcknowledged(ctx context.Context, ttl time.Duration, ack luakit.ReplicaAck) (bool, error) {
	if ms := ttl.Milliseconds(); ms != b.ms {
		b.args[2], b.ms = strconv.FormatInt(ms, 10), ms
	}
	return b.extend(ctx, ack)
}

// extend sends the extend script, acknowledged as ack says (zero: not).
func (b *backend) extend(ctx context.Context, ack luakit.ReplicaAck) (bool, error) {
	resp, ackErr := extendScript.ExecOrderedAck(ctx, b.client, ack, b.keys[:], b.args[:])
	n, err := resp.AsInt64()
	if err != nil {
		return false, err
	}
	held, err := decodeOwned("extend", n)
	if err != nil || !held {
		return held, err
	}
	return true, ackErr
}

// Verify runs verify.lua: 1 when the field holds this owner's token, -1 absent, -2 another owner's.
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.client, b.keys[:], b.args[:2]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeOwned("verify", n)
}

// Release runs release.lua: 1 deleted, -1 absent, -2 held by another owner (untouched).
func (b *backend) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.ExecOrdered(ctx, b.client, b.keys[:], b.args[:2]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeOwned("release", n)
}

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

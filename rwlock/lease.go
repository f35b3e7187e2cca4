package rwlock

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
	Released        = ownership.Released        // this call removed this owner's entry
	AlreadyReleased = ownership.AlreadyReleased // an earlier answered release on this handle settled it
	NotOwned        = ownership.NotOwned        // the server held no entry of this owner
)

// Lease is a held read or write lease: one holder entry, guarded by a random owner token, in the key's
// sorted set. Its methods Extend, ExtendTTL, KeepAlive, Verify, Release, Close, Done, Context, Err,
// Remaining, Deadline and TTL behave as the contract in package
// github.com/coordkit/coordkit/luakit/ownership says (ExtendTTL takes whole milliseconds, at least
// 1ms). What is particular to rwlock: renewing, verifying and releasing touch only this holder's entry
// (other readers keep their own expiries). Its methods are safe for concurrent use. Leases are made by
// a [Locker]; the zero value is not usable.
type Lease struct {
	own  ownership.Handle
	b    backend
	mode Mode
	key  string // as given, without prefix
}

//go:generate go run ../tools/cmd/handlegen -type Lease -noun lease

// backend runs the owner-checked scripts of one holder entry for the Lease's Handle.
type backend struct {
	client rueidis.Client
	cfg    *ownership.Config
	own    *ownership.Handle // the Lease's
	key    string            // the physical lock key
	entry  string            // mode tag + ":" + owner: the sorted-set member
	ms     int64             // the acquisition's TTL in ms
}

// SendAcquire sends acquire.lua with the entry's mode tag and owner token.
func (b *backend) SendAcquire(ctx context.Context) ownership.Sent {
	return b.cfg.Send(ctx, acquireScript, b.client, []string{b.key},
		[]string{b.entry[:1], b.entry[2:], strconv.FormatInt(b.ms, 10)})
}

// DecodeAcquire reads acquire.lua's reply: {1, 0} granted; {0, wait_ms} held in a conflicting mode,
// wait_ms until the conflicting entries expire.
func (b *backend) DecodeAcquire(msg rueidis.RedisMessage) (ownership.Reply, error) {
	status, v, err := ownership.Pair(msg)
	if err != nil {
		return ownership.Reply{}, err
	}
	if status == luakit.StatusOK {
		return ownership.Reply{Granted: true}, nil
	}
	if status != luakit.StatusBusy {
		return ownership.Reply{}, fmt.Errorf("unexpected status %d", status)
	}
	wait, err := v.AsInt64()
	if err != nil {
		return ownership.Reply{}, fmt.Errorf("wait: %w", err)
	}
	return ownership.Reply{Busy: true, HolderTTL: time.Duration(wait) * time.Millisecond}, nil
}

// GrantAcquire starts the Lease's Handle for the grant of the attempt sent at start.
func (b *backend) GrantAcquire(ctx context.Context, start time.Time) error {
	return b.own.Grant(ctx, b, b.cfg, start, time.Duration(b.ms)*time.Millisecond)
}

// ReleaseAcquire is the attempt's owner-checked cleanup: Release for its entry.
func (b *backend) ReleaseAcquire(ctx context.Context) (bool, error) { return b.Release(ctx) }

// Extend restarts the entry's expiry at ttl on the server; held is false when the entry is gone.
// The Handle has checked that ttl is whole milliseconds, at least 1ms.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	return b.ExtendAcknowledged(ctx, ttl, luakit.ReplicaAck{})
}

// ExtendAcknowledged is Extend followed by the acknowledgement ack (zero: none;
// [ownership.Acknowledger]).
func (b *backend) ExtendAcknowledged(ctx context.Context, ttl time.Duration, ack luakit.ReplicaAck) (bool, error) {
	resp, ackErr := extendScript.ExecOrderedAck(ctx, b.client, ack, []string{b.key}, []string{b.entry, strconv.FormatInt(ttl.Milliseconds(), 10)})
	n, err := resp.AsInt64()
	if err != nil {
		return false, err
	}
	held, err := decodeHeld(n)
	if err != nil || !held {
		return held, err
	}
	return true, ackErr
}

// Verify reports whether the entry exists unexpired now (verify.lua: 1, or -1 when absent or expired).
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.client, []string{b.key}, []string{b.entry}).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeHeld(n)
}

// Release removes the entry; removed is false when it was absent or expired.
func (b *backend) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.ExecOrdered(ctx, b.client, []string{b.key}, []string{b.entry}).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeHeld(n)
}

// Mode returns [Read] or [Write].
func (h *Lease) Mode() Mode { return h.mode }

// Name returns the key as given to the Locker (without the key prefix).
func (h *Lease) Name() string { return h.key }

// OwnerToken returns the random 128-bit owner token (32 hex characters) that guards renewal and release.
// The entry in the key's sorted set is "r:" or "w:" followed by it. Keep it private: never log it or use
// it as a metric attribute.
func (h *Lease) OwnerToken() string { return h.b.entry[2:] }

// decodeHeld reads the status of extend.lua, verify.lua or release.lua: 1 (ok) true, -1 (absent: the
// entry is gone or expired) false.
func decodeHeld(n int64) (bool, error) {
	switch n {
	case luakit.StatusOK:
		return true, nil
	case luakit.StatusAbsent:
		return false, nil
	}
	return false, fmt.Errorf("unexpected reply %d", n)
}

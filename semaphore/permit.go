package semaphore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// ReleaseOutcome is the result of [Permit.Release]: the shared [ownership.Outcome], so outcomes compare
// equal across Coordkit's primitives. The zero value is not an outcome: Release returns it only with an
// error.
type ReleaseOutcome = ownership.Outcome

// The release outcomes (see [ownership.Outcome]).
const (
	Released        = ownership.Released        // this call removed this owner's permit
	AlreadyReleased = ownership.AlreadyReleased // an earlier answered release on this handle settled it
	NotOwned        = ownership.NotOwned        // the server held no permit of this owner
)

// Permit is a held permit: a random owner token that is a member of the semaphore's sorted set. Its
// methods Extend, ExtendTTL, KeepAlive, Verify, Release, Close, Done, Context, Err, Remaining, Deadline
// and TTL behave as the contract in package github.com/coordkit/coordkit/luakit/ownership says. What
// differs (a permit may have no expiry; renewals, Verify and Release never check the capacity; Verify
// prunes, so it needs the primary and write permission; Close retries an unanswered release in the
// background) is in the package documentation, "Ownership". Its methods are safe for concurrent use.
type Permit struct {
	own ownership.Handle
	b   backend
}

//go:generate go run ../tools/cmd/handlegen -type Permit -noun permit -recv p -ttl "whole milliseconds, at least 1ms"

// backend sends the owner-checked scripts of one permit for its Handle.
type backend struct {
	s      *Semaphore
	own    *ownership.Handle // the Permit's
	owner  [2]string         // the owner token and the weight, as the verify ([:1]) and release scripts' ARGV
	weight int64             // the permit's weight: units of the capacity it holds
	ms     string            // the acquisition's TTL argument (ms, noExpiryArg for no expiry)
	ttl    time.Duration     // the acquisition's TTL
	// releaseErr is the last Release's error, read after an acquisition's cleanup (Grant's, for a late
	// grant) to decide on a background retry. Release calls are serialised: the acquiring goroutine's
	// cleanup happens before the handle is shared, and the Handle runs its releases one at a time.
	releaseErr error
}

// SendAcquire sends acquire.lua with the permit's owner token, TTL and the Semaphore's capacity.
func (b *backend) SendAcquire(ctx context.Context) ownership.Sent {
	return b.s.cfg.own.Send(ctx, acquireScript, b.s.client, b.s.keys, []string{b.owner[0], b.ms, b.s.capArg, b.owner[1]})
}

// DecodeAcquire reads acquire.lua's reply (see decodeAcquire): granted, busy until the earliest
// permit expires, or a capacity mismatch (nothing written).
func (b *backend) DecodeAcquire(msg rueidis.RedisMessage) (ownership.Reply, error) {
	arr, err := msg.ToArray()
	if err != nil {
		return ownership.Reply{}, err
	}
	status, v, wait, err := decodeAcquire(arr)
	switch {
	case err != nil:
		return ownership.Reply{}, err
	case status == luakit.StatusOK:
		return ownership.Reply{Granted: true}, nil
	case status == luakit.StatusBusy:
		return ownership.Reply{Busy: true, HolderTTL: wait}, nil
	}
	return ownership.Reply{Err: &CapacityMismatchError{Stored: v, Requested: b.s.capacity}}, nil
}

// GrantAcquire starts the Permit's Handle for the grant of the attempt sent at start. A late grant is
// ErrLateReply: the Handle sent the owner-token release, retried here in the background if unanswered.
func (b *backend) GrantAcquire(ctx context.Context, start time.Time) error {
	err := b.own.Grant(ctx, b, &b.s.cfg.own, start, b.ttl)
	if err != nil && b.releaseErr != nil {
		b.s.retryLater(stageAcquire, b.releaseErr, b.retryRelease)
	}
	return err
}

// ReleaseAcquire is the attempt's owner-token cleanup; if unanswered it is retried in the background.
func (b *backend) ReleaseAcquire(ctx context.Context) (bool, error) {
	removed, err := b.Release(ctx)
	if err != nil {
		b.s.retryLater(stageAcquire, err, b.retryRelease)
	}
	return removed, err
}

// Extend restarts the permit's expiry at ttl (0: none) on the server clock, if this owner holds it.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	// The Handle validated ttl: whole milliseconds >= 1, or 0 from ExtendNoExpiry or the Extend of a
	// permit without expiry.
	return b.ExtendAcknowledged(ctx, ttl, luakit.ReplicaAck{})
}

// ExtendAcknowledged is Extend followed by the acknowledgement ack (zero: none;
// [ownership.Acknowledger]).
func (b *backend) ExtendAcknowledged(ctx context.Context, ttl time.Duration, ack luakit.ReplicaAck) (bool, error) {
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	resp, ackErr := extendScript.ExecOrderedAck(ctx, b.s.client, ack, b.s.keys, []string{b.owner[0], ms, b.owner[1]})
	n, err := resp.AsInt64()
	if err != nil {
		return false, err
	}
	held, err := decodeHeld("extend", n)
	if err != nil || !held {
		return held, err
	}
	return true, ackErr
}

// Verify reports whether this owner holds an active permit (verify.lua: 1, or -1 for none).
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.s.client, b.s.keys, b.owner[:1]).AsInt64()
	if err != nil {
		return false, err
	}
	return decodeHeld("verify", n)
}

// Release removes this owner's permit.
func (b *backend) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.ExecOrdered(ctx, b.s.client, b.s.keys, b.owner[:]).AsInt64()
	removed := false
	if err == nil {
		removed, err = decodeHeld("release", n)
	}
	b.releaseErr = err
	return removed, err
}

// retryRelease is one background retry of an acquisition's cleanup.
func (b *backend) retryRelease(ctx context.Context) error {
	ectx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	_, err := b.Release(ectx)
	return err
}

// Name returns the semaphore's name as given to [New] (without the key prefix).
func (p *Permit) Name() string { return p.b.s.name }

// OwnerToken returns the random 128-bit owner token (32 hex characters): the permit's member in the
// sorted set. Keep it private: never log it or use it as a metric attribute.
func (p *Permit) OwnerToken() string { return p.b.owner[0] }

// Weight returns the units of the capacity the permit holds: 1, or n for a permit taken with
// [Semaphore.TryAcquireN] or [Semaphore.AcquireN].
func (p *Permit) Weight() int64 { return p.b.weight }

// decodeHeld reads the status of the owner-checked script op (extend.lua, verify.lua, release.lua):
// 1 (ok) true, -1 (absent: this owner holds no active permit) false.
func decodeHeld(op string, n int64) (bool, error) {
	switch n {
	case luakit.StatusOK:
		return true, nil
	case luakit.StatusAbsent:
		return false, nil
	}
	return false, fmt.Errorf("unexpected %s reply %d", op, n)
}

// ExtendNoExpiry removes the permit's expiry if this owner holds it: it then lasts until released, as
// one taken by [Semaphore.TryAcquireNoExpiry]. Its answers are [Permit.ExtendTTL]'s: (true, nil)
// confirmed in time; (false, nil) lost, expired or ended; (false, err) failed, wrapping [ErrUncertain]
// without a reply (the permit keeps its previous estimate). Use [Permit.ExtendTTL] to give it a TTL
// again. With [WithHooks] it is the operation SEMAPHORE EXTEND.
func (p *Permit) ExtendNoExpiry(ctx context.Context) (bool, error) { return p.own.ExtendNoExpiry(ctx) }

// NoExpiry reports whether the permit has no expiry (its TTL is then 0 and Remaining [Forever] while
// held).
func (p *Permit) NoExpiry() bool { return p.own.TTL() == 0 }

package rwlock

import (
	"context"
	"fmt"
	"log/slog"
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
	Released        = ownership.Released        // this call removed this owner's entry
	AlreadyReleased = ownership.AlreadyReleased // an earlier answered release on this handle settled it
	NotOwned        = ownership.NotOwned        // the server held no entry of this owner
)

// Lease is a held read or write lease: one holder entry, guarded by a random owner token, in the key's
// sorted set. It behaves as the contract in package github.com/coordkit/coordkit/luakit/ownership
// says: Extend, ExtendTTL, KeepAlive, Verify, Release, Done, Context, Err, Remaining, Deadline, TTL
// and Settled are those of the embedded [ownership.Handle] (ExtendTTL takes whole milliseconds, at
// least 1ms). What is particular to rwlock: renewing, verifying and releasing touch only this holder's
// entry (other readers keep their own expiries), and [Lease.Close] is a bounded best-effort Release
// that logs its failures. Its methods are safe for concurrent use. Leases are made by a [Locker]; the
// zero value is not usable.
type Lease struct {
	ownership.Handle
	b    backend
	l    *Locker
	mode Mode
	key  string // as given, without prefix
}

// backend runs the owner-checked scripts of one holder entry for the embedded Handle.
type backend struct {
	client rueidis.Client
	key    string // the physical lock key
	entry  string // mode tag + ":" + owner: the sorted-set member
}

// Extend restarts the entry's expiry at ttl on the server; held is false when the entry is gone.
// The Handle has checked that ttl is whole milliseconds, at least 1ms.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := extendScript.ExecOrdered(ctx, b.client, []string{b.key}, []string{b.entry, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		return false, err
	}
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, fmt.Errorf("unexpected reply %d", n)
}

// Verify reports whether the entry exists unexpired now (verify.lua: its remaining ms, or -2).
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.client, []string{b.key}, []string{b.entry}).AsInt64()
	if err != nil {
		return false, err
	}
	switch {
	case n >= 1:
		return true, nil
	case n == -2:
		return false, nil
	}
	return false, fmt.Errorf("unexpected reply %d", n)
}

// Release removes the entry; removed is false when it was absent or expired.
func (b *backend) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.ExecOrdered(ctx, b.client, []string{b.key}, []string{b.entry}).AsInt64()
	if err != nil {
		return false, err
	}
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, fmt.Errorf("unexpected reply %d", n)
}

// Mode returns [Read] or [Write].
func (h *Lease) Mode() Mode { return h.mode }

// Key returns the key as given to the Locker (without the key prefix).
func (h *Lease) Key() string { return h.key }

// OwnerToken returns the random 128-bit owner token (32 hex characters) that guards renewal and release.
// The entry in the key's sorted set is "r:" or "w:" followed by it. Keep it private: never log it or use
// it as a metric attribute.
func (h *Lease) OwnerToken() string { return h.b.entry[2:] }

// Close releases the lease best-effort, so that a Lease is an io.Closer: one [Lease.Release] bounded
// by the cleanup timeout ([WithCleanupTimeout], default 1s) whatever the caller's context, so it never
// blocks much longer than that. It ends the lease with [ErrReleased] once the release is sent and stops
// a running keep-alive. It returns nil when the server answered, and does nothing and returns nil once
// an earlier release was answered. A failure is logged at warning level and returned (wrapping
// [ErrUncertain] when no reply was read); a later Release still sends an owner-checked release.
//
// An entry that Close misses (server unreachable, timeout) keeps blocking conflicting holders until it
// expires. Call [Lease.Release] when you need the outcome, and prefer short leases.
//
// With [WithHooks] it is the operation RWLOCK CLOSE; a rejection is returned unchanged, nothing is
// sent or logged, the lease is kept and Close can be called again.
func (h *Lease) Close() error {
	if h.Settled() {
		return nil
	}
	timeout := h.l.cfg.own.CleanupTimeout
	if timeout <= 0 {
		timeout = time.Second // the Handle's default
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := h.Handle.CloseContext(ctx) // the operation RWLOCK CLOSE, as Handle.Close
	// Nothing was sent and the lease is unchanged before the timeout: a hook rejected the Close. No
	// release failed, so there is nothing to log; the caller gets the rejection and may call again.
	if err != nil && !(ctx.Err() == nil && h.Err() == nil) {
		lg := h.l.cfg.own.Logger // nil without WithLogger: the default, as the Handle's own warnings
		if lg == nil {
			lg = slog.Default()
		}
		lg.LogAttrs(context.Background(), slog.LevelWarn,
			"coordkit/rwlock: best-effort release in Close failed; the entry expires after its TTL",
			slog.String("mode", h.mode.String()), slog.String("error", err.Error()))
	}
	return err
}

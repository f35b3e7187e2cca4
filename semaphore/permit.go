package semaphore

import (
	"context"
	"fmt"
	"strconv"
	"time"

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

// Permit is a held permit: a random owner token that is a member of the semaphore's sorted set. It
// behaves as the contract in package github.com/coordkit/coordkit/luakit/ownership says, through the
// embedded [ownership.Handle]: Extend, KeepAlive, Verify, Release, Done, Context, Err, Remaining,
// Deadline and TTL. What differs:
//
//   - A permit may have no expiry ([NoExpiry]): Remaining is [Forever], Deadline the zero time, and
//     KeepAlive does nothing.
//   - [Permit.ExtendTTL] validates its ttl (0 allowed) and changes the permit's lifetime; neither it
//     nor Verify nor Release checks the capacity.
//   - Verify prunes expired permits, so it needs the primary and write permission.
//   - [Permit.Close] is a best-effort Release that returns its first attempt's error, like
//     ownership.Handle.Close, and also retries an unanswered release in the background.
//
// Its methods are safe for concurrent use.
type Permit struct {
	ownership.Handle
	b backend
}

// backend sends the owner-checked scripts of one permit for its Handle.
type backend struct {
	s     *Semaphore
	owner [1]string // the owner token, as the verify and release scripts' ARGV
	// releaseErr is the last Release's error, read after an acquisition's cleanup (Grant's, for a late
	// grant) to decide on a background retry. Release calls are serialised: the acquiring goroutine's
	// cleanup happens before the handle is shared, and the Handle runs its releases one at a time.
	releaseErr error
}

// Extend restarts the permit's expiry at ttl (0: none) on the server clock, if this owner holds it.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	// The Handle validated ttl: 0 (no expiry, Config.NoExpiry) or whole milliseconds >= 1.
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	n, err := extendScript.ExecOrdered(ctx, b.s.client, b.s.keys, []string{b.owner[0], ms}).AsInt64()
	if err != nil {
		return false, err
	}
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, fmt.Errorf("unexpected extend reply %d", n)
}

// Verify reports whether this owner holds an active permit (verify.lua: remaining ms, -1 for no
// expiry, -2 for none).
func (b *backend) Verify(ctx context.Context) (bool, error) {
	n, err := verifyScript.ExecOrdered(ctx, b.s.client, b.s.keys, b.owner[:]).AsInt64()
	if err != nil {
		return false, err
	}
	switch {
	case n == -2:
		return false, nil
	case n == -1 || n >= 1:
		return true, nil
	}
	return false, fmt.Errorf("unexpected verify reply %d", n)
}

// Release removes this owner's permit.
func (b *backend) Release(ctx context.Context) (bool, error) {
	n, err := releaseScript.ExecOrdered(ctx, b.s.client, b.s.keys, b.owner[:]).AsInt64()
	if err == nil && n != 0 && n != 1 {
		err = fmt.Errorf("unexpected release reply %d", n)
	}
	b.releaseErr = err
	return n == 1 && err == nil, err
}

// retryRelease is one background retry of an acquisition's cleanup.
func (b *backend) retryRelease(ctx context.Context) error {
	ectx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	_, err := b.Release(ectx)
	return err
}

// OwnerToken returns the random 128-bit owner token (32 hex characters): the permit's member in the
// sorted set. Keep it private: never log it or use it as a metric attribute.
func (p *Permit) OwnerToken() string { return p.b.owner[0] }

// ExtendTTL resets the permit's expiry to ttl from now on the server clock (renewing it, or changing its
// lifetime; [NoExpiry] makes it last until released), only if this owner still holds it; ttl is
// truncated to whole milliseconds. The capacity is not checked: a renewal never fails because the
// capacity was lowered. A negative or sub-millisecond ttl fails with [ErrInvalidTTL] before any I/O and
// changes nothing. Otherwise it is [ownership.Handle.ExtendTTL]: (true, nil) when reset in time, (false,
// nil) when the handle ended, the permit is lost, or the reply came too late (the permit is then
// surrendered), an error wrapping [ErrUncertain] when no reply was read (the handle keeps its previous
// estimate). Permit.Extend renews at the current TTL.
func (p *Permit) ExtendTTL(ctx context.Context, ttl time.Duration) (bool, error) {
	_, d, err := ttlArg(ttl)
	if err != nil {
		return false, err
	}
	return p.Handle.ExtendTTL(ctx, d)
}

// Close releases the permit on a best-effort basis, so that a Permit is an io.Closer. It is
// Permit.Release bounded by the cleanup timeout (default 1s) instead of a ctx, and returns that first
// attempt's error: nil when the server answered (whatever the outcome), an error wrapping
// [ErrUncertain] when no reply was read, or the server's or the context's error. An attempt that was
// not answered (or could not be sent in time: a concurrent Extend holds the handle) is also retried in
// the background with jittered backoff for up to the retry window (default 1 minute), then given up,
// counted in [MetricCleanupAbandoned] and logged; a retry that is answered settles the handle.
// [Semaphore.Close] waits for or stops those retries. Close after an answered release does no I/O and
// returns nil. Close is also how to finish the surrender of a permit whose late renewal's release went
// unanswered.
//
// With [WithHooks] it is the operation SEMAPHORE CLOSE (not a SEMAPHORE RELEASE as well). A rejection is
// returned unchanged with nothing sent, the permit kept and no background retry, so Close can be
// called again.
func (p *Permit) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.b.s.cfg.own.CleanupTimeout)
	defer cancel()
	err := p.Handle.CloseContext(ctx)
	if err == nil {
		return nil
	}
	// Nothing was sent and the permit is unchanged although the cleanup timeout has not passed: a hook
	// rejected the Close (every other unsent attempt ends with ctx). There is nothing to retry.
	if ctx.Err() == nil && p.Handle.Err() == nil {
		return err
	}
	p.b.s.retryLater(stageClose, err, p.release)
	return err
}

// release is one background retry of an admitted Close's unanswered release: owed cleanup, not
// admitted again (the Close's one scope covers it).
func (p *Permit) release(ctx context.Context) error {
	_, err := p.Handle.ReleaseOwed(ctx)
	return err
}

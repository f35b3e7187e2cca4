package lease_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/testkit"
)

// faultTTL is the lease TTL of the fault scenarios: short, so a field left by a lost reply expires soon.
const faultTTL = 500 * time.Millisecond

// TestLeaseFaults drops replies with the fault proxy on every standalone target with hash-field expiry
// (Redis 8, Valkey 9; on Redis 7.0 and Valkey 8 every lease call fails before writing, see TestLease):
// an acquisition, renewal or release whose reply is lost is reported as uncertain (never as success);
// the cleanup after an uncertain acquisition runs behind it on the server; an uncertain renewal keeps
// the previous estimate, and a later renewal can succeed; a retried owner-checked release settles
// ownership.
func TestLeaseFaults(t *testing.T) {
	// the proxy drives single servers; lease needs hash-field expiry
	matrix.Run(t, matrix.Select(matrix.Targets(), proxiable), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		t.Run("uncertain_acquire_is_not_success", func(t *testing.T) { faultUncertainAcquire(t, e) })
		t.Run("uncertain_extend_keeps_estimate", func(t *testing.T) { faultUncertainExtend(t, e) })
		t.Run("uncertain_release_is_settled_by_retry", func(t *testing.T) { faultUncertainRelease(t, e) })
	})
}

// proxiedLeases returns a Leases whose client (also returned) goes through a new fault proxy to the
// target, with a short cleanup timeout and a silent logger (the cleanup after a lost reply is expected
// to fail).
func proxiedLeases(t *testing.T, e *env) (*testkit.Proxy, rueidis.Client, *lease.Leases) {
	t.Helper()
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	c := proxy.Client(t, matrix.NoCache)
	ls := newLeases(t, c,
		lease.WithCleanupTimeout(200*time.Millisecond),
		lease.WithLogger(slog.New(slog.DiscardHandler)))
	return proxy, c, ls
}

// warm takes and releases the field once through ls, so the feature probe has run, the connection is
// up and the scripts are loaded: the reply dropped next is the script's.
func warm(t *testing.T, ls *lease.Leases, key, field string) {
	t.Helper()
	l, err := ls.TryAcquire(ctx(t), key, field, faultTTL)
	require.NoError(t, err)
	release(t, l, lease.Released)
}

// dropped returns a context for one call whose reply is dropped: it ends after 300 ms.
func dropped() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 300*time.Millisecond)
}

// requireFieldGoneBy polls until the field and its hash are absent, failing after deadline (checked at
// least once).
func (e *env) requireFieldGoneBy(t *testing.T, key, field string, deadline time.Time, what string) {
	t.Helper()
	for {
		_, held := e.hget(t, key, field)
		if !held && e.PTTL(t, key) == -2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: field still present (HPTTL %d ms) after the lease's TTL + 1 s", what, e.hpttl(t, key, field))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// faultUncertainAcquire: the acquire script reaches the server but its reply is dropped. TryAcquire must
// report ErrUncertain and no handle. The owner-checked cleanup is queued behind the acquisition on the
// same connection, so the server runs it right after (its reply is dropped too): the field is gone long
// before its TTL.
func faultUncertainAcquire(t *testing.T, e *env) {
	const ttl = 10 * time.Second
	key, field := hashKey("fault-acquire"), "worker:1"
	proxy, c, ls := proxiedLeases(t, e)
	warm(t, ls, key, field)

	require.NoError(t, proxy.DropReplies())
	actx, cancel := dropped()
	l, err := ls.TryAcquire(actx, key, field, ttl)
	cancel()
	require.Nil(t, l, "an uncertain acquisition never returns a handle")
	require.ErrorIs(t, err, lease.ErrUncertain, "a lost reply must be uncertain, got %v", err)
	e.requireFieldGoneBy(t, key, field, time.Now().Add(time.Second), "the cleanup must run behind the acquisition")
	require.NoError(t, proxy.Reset())

	// The field is free again, through the same (reconnected) client.
	matrix.WaitServing(t, c) // Reset closed the connection whose replies were dropped
	l, err = ls.TryAcquire(ctx(t), key, field, faultTTL)
	require.NoError(t, err)
	release(t, l, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// faultUncertainExtend: a renewal whose reply is dropped returns false and ErrUncertain; the handle keeps
// its previous estimate (still vouching, Deadline unchanged), and once replies flow again a renewal
// succeeds and moves the estimate. A second lost renewal, never retried, lets the estimate elapse at
// the previous deadline (ErrExpired), and the field is gone within its TTL of that renewal.
func faultUncertainExtend(t *testing.T, e *env) {
	const ttl = 2 * time.Second
	key, field := hashKey("fault-extend"), "worker:1"
	proxy, c, ls := proxiedLeases(t, e)
	warm(t, ls, key, field)
	l, err := ls.TryAcquire(ctx(t), key, field, ttl)
	require.NoError(t, err)
	e.requireHeld(t, key, field, l.OwnerToken())
	deadline := l.Deadline()

	require.NoError(t, proxy.DropReplies())
	ectx, cancel := dropped()
	ok, err := l.Extend(ectx)
	cancel()
	require.False(t, ok, "an uncertain renewal is never success")
	require.ErrorIs(t, err, lease.ErrUncertain)
	require.NoError(t, l.Err(), "an uncertain renewal does not end the lease")
	require.Equal(t, deadline, l.Deadline(), "an uncertain renewal keeps the previous estimate")
	require.Greater(t, l.Remaining(), time.Duration(0))
	require.NoError(t, proxy.Reset())

	matrix.WaitServing(t, c) // Reset closed the connection whose reply was dropped
	ok, err = l.Extend(ctx(t))
	require.NoError(t, err)
	require.True(t, ok, "a renewal after the fault succeeds while the estimate lasts")
	require.True(t, l.Deadline().After(deadline), "a confirmed renewal moves the estimate")
	deadline = l.Deadline()

	require.NoError(t, proxy.DropReplies())
	sent := time.Now()
	ectx, cancel = dropped()
	ok, err = l.Extend(ectx)
	cancel()
	require.False(t, ok)
	require.ErrorIs(t, err, lease.ErrUncertain)
	// Replies flow again, but nothing renews: keep the window of dropped replies short (a reply that
	// reaches toxiproxy while Reset removes the toxic strands one of its goroutines).
	require.NoError(t, proxy.Reset())
	select {
	case <-l.Done():
		require.False(t, time.Now().Before(deadline), "the estimate ended before its deadline")
	case <-time.After(time.Until(deadline) + time.Second):
		t.Fatal("the estimate did not elapse at the previous deadline")
	}
	require.ErrorIs(t, l.Err(), lease.ErrExpired)

	// The lost renewal ran (restarting the field's expiry at about its send time): the field is gone
	// within TTL + 1 s of it.
	e.requireFieldGoneBy(t, key, field, sent.Add(ttl+time.Second), "after the uncertain renewal")
	matrix.WaitServing(t, c)
	release(t, l, lease.NotOwned) // the field expired
	e.requireAbsent(t, key, "hash key")
}

// faultUncertainRelease: a release whose reply is dropped returns ErrUncertain; the server applied it, and
// the retried release after the fault settles it as AlreadyReleased.
func faultUncertainRelease(t *testing.T, e *env) {
	key, field := hashKey("fault-release"), "worker:1"
	proxy, c, ls := proxiedLeases(t, e)
	warm(t, ls, key, field)
	l, err := ls.TryAcquire(ctx(t), key, field, faultTTL)
	require.NoError(t, err)

	require.NoError(t, proxy.DropReplies())
	sent := time.Now()
	rctx, cancel := dropped()
	out, err := l.Release(rctx)
	cancel()
	require.ErrorIs(t, err, lease.ErrUncertain, "a lost release reply must be uncertain, got %v (%v)", err, out)
	require.NotEqual(t, lease.Released, out, "an uncertain release is never reported released")
	require.ErrorIs(t, l.Err(), lease.ErrReleased, "the handle ends as the release is sent")
	require.NoError(t, proxy.Reset())

	// The request reached the server, so the field is gone (and would be after its TTL anyway).
	e.requireFieldGoneBy(t, key, field, sent.Add(faultTTL+time.Second), "after the uncertain release")
	matrix.WaitServing(t, c)             // Reset closed the connection whose reply was dropped
	release(t, l, lease.AlreadyReleased) // the retried owner-checked release settles it
	release(t, l, lease.AlreadyReleased)
	e.requireAbsent(t, key, "hash key")
}

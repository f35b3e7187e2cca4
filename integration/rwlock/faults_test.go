package rwlock_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/testkit"
)

// faultTTL is the lease TTL of the fault scenarios: short, so an entry left by a lost reply expires soon.
const faultTTL = 500 * time.Millisecond

// TestRWLockFaults drops replies with the fault proxy on every standalone target: an acquisition, renewal
// or release whose reply is lost is reported as uncertain (never as success), an uncertain renewal marks
// the handle lost, a retried owner-checked release settles it, and the server ends clean at the latest
// when the lease's TTL has passed.
func TestRWLockFaults(t *testing.T) {
	for _, st := range matrix.Targets() {
		if st.Cluster {
			continue // the proxy drives single servers
		}
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			matrix.TakeSlot(t)
			e := startEnv(t, st)
			t.Run("uncertain_acquire_is_not_success", func(t *testing.T) { faultUncertainAcquire(t, e) })
			t.Run("uncertain_extend_marks_lost", func(t *testing.T) { faultUncertainExtend(t, e) })
			t.Run("uncertain_release_is_settled_by_retry", func(t *testing.T) { faultUncertainRelease(t, e) })
			t.Run("release_after_failed_close_still_releases", func(t *testing.T) { faultFailedClose(t, e) })
		})
	}
}

// proxiedLocker returns a Locker whose client goes through a new fault proxy to the target, with a short
// cleanup timeout and a silent logger (the cleanup after a lost reply is expected to fail).
func proxiedLocker(t *testing.T, e *env) (*testkit.Proxy, *rwlock.Locker) {
	t.Helper()
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	c := proxy.Client(t, func(o *rueidis.ClientOption) { o.DisableCache = true })
	l, err := rwlock.New(c,
		rwlock.WithCleanupTimeout(200*time.Millisecond),
		rwlock.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	return proxy, l
}

// warm takes and releases a write lease on key once through l, so the connection is up and the scripts
// are loaded: the reply dropped next is the script's.
func warm(t *testing.T, l *rwlock.Locker, key string) {
	t.Helper()
	w, err := l.TryAcquireWrite(ctx(t), key, faultTTL)
	require.NoError(t, err)
	release(t, w, rwlock.Released)
}

// dropped returns a context for one call whose reply is dropped: it ends after 300 ms.
func dropped() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 300*time.Millisecond)
}

// requireGoneBy polls until key is absent, failing after deadline (checked at least once).
func (e *env) requireGoneBy(t *testing.T, key string, deadline time.Time, what string) {
	t.Helper()
	for {
		p := e.pttl(t, key)
		if p == -2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: lock key still present (PTTL %d ms, entries %v) after the lease's TTL + 1 s", what, p, keysOf(e.entries(t, key)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// faultUncertainAcquire: the acquire script reaches the server but its reply is dropped. TryAcquireWrite
// must report ErrUncertain and no handle; the key is gone (cleanup or expiry) within TTL + 1 s.
func faultUncertainAcquire(t *testing.T, e *env) {
	const key = "ck:rw:fault-acquire"
	proxy, l := proxiedLocker(t, e)
	warm(t, l, key)

	require.NoError(t, proxy.DropReplies())
	sent := time.Now()
	actx, cancel := dropped()
	w, err := l.TryAcquireWrite(actx, key, faultTTL)
	cancel()
	require.Nil(t, w, "an uncertain acquisition never returns a handle")
	require.ErrorIs(t, err, rwlock.ErrUncertain, "a lost reply must be uncertain, got %v", err)
	require.NoError(t, proxy.Reset())

	e.requireGoneBy(t, key, sent.Add(faultTTL+time.Second), "after the uncertain acquisition")

	// The key is free again, through the same (reconnected) client.
	w, err = l.TryAcquireWrite(ctx(t), key, faultTTL)
	require.NoError(t, err)
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// faultUncertainExtend: a renewal of a read lease whose reply is dropped returns false and ErrUncertain;
// the handle is marked lost (fail closed, Extend false from then on) and the entry expires after its
// TTL.
func faultUncertainExtend(t *testing.T, e *env) {
	const key = "ck:rw:fault-extend"
	proxy, l := proxiedLocker(t, e)
	warm(t, l, key)
	r, err := l.TryAcquireRead(ctx(t), key, faultTTL)
	require.NoError(t, err)
	e.requireEntries(t, key, r)

	require.NoError(t, proxy.DropReplies())
	sent := time.Now()
	ectx, cancel := dropped()
	ok, err := r.Extend(ectx)
	cancel()
	require.False(t, ok, "an uncertain renewal is never success")
	require.ErrorIs(t, err, rwlock.ErrUncertain)
	select {
	case <-r.Done():
	default:
		t.Fatal("Done must be closed after an uncertain renewal")
	}
	require.ErrorIs(t, r.Err(), rwlock.ErrLost, "an uncertain renewal marks the handle lost")
	require.Zero(t, r.Remaining())
	require.NoError(t, proxy.Reset())

	ok, err = r.Extend(ctx(t))
	require.NoError(t, err)
	require.False(t, ok, "a lost handle never renews")

	// The renewal may have run (restarting the entry's expiry at its send time): the key is gone within
	// TTL + 1 s of it.
	e.requireGoneBy(t, key, sent.Add(faultTTL+time.Second), "after the uncertain renewal")
	release(t, r, rwlock.NotOwned)
	e.requireAbsent(t, key)
}

// faultUncertainRelease: a release whose reply is dropped returns ErrUncertain; the server applied it,
// and the retried release after the fault settles it as AlreadyReleased.
func faultUncertainRelease(t *testing.T, e *env) {
	const key = "ck:rw:fault-release"
	proxy, l := proxiedLocker(t, e)
	warm(t, l, key)
	w, err := l.TryAcquireWrite(ctx(t), key, faultTTL)
	require.NoError(t, err)

	require.NoError(t, proxy.DropReplies())
	sent := time.Now()
	rctx, cancel := dropped()
	out, err := w.Release(rctx)
	cancel()
	require.ErrorIs(t, err, rwlock.ErrUncertain, "a lost release reply must be uncertain, got %v (%v)", err, out)
	require.NotEqual(t, rwlock.Released, out, "an uncertain release is never reported released")
	require.Error(t, w.Err(), "the handle no longer vouches for the lease")
	require.NoError(t, proxy.Reset())

	// The request reached the server, so the entry is gone (and would be after its TTL anyway).
	e.requireGoneBy(t, key, sent.Add(faultTTL+time.Second), "after the uncertain release")
	release(t, w, rwlock.AlreadyReleased) // the retried owner-checked release settles it
	release(t, w, rwlock.AlreadyReleased)
	e.requireAbsent(t, key)
}

// faultFailedClose makes Close's best-effort release fail (the client's user loses the permission to
// run scripts, so the entry stays): a later Release must still remove the entry and report Released,
// not AlreadyReleased without I/O while the entry keeps blocking writers.
func faultFailedClose(t *testing.T, e *env) {
	const key, user = "ck:rw:fault-close", "ck-rw-fault-close"
	acl := func(args ...string) {
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Arbitrary("ACL", "SETUSER").Args(args...).Build()).Error())
	}
	acl(user, "on", ">pw", "~*", "&*", "+@all")
	t.Cleanup(func() {
		_ = e.Raw.Do(context.Background(), e.Raw.B().Arbitrary("ACL", "DELUSER").Args(user).Build()).Error()
	})
	c := e.newClient(t, func(o *rueidis.ClientOption) {
		o.DisableCache, o.Username, o.Password = true, user, "pw"
	})
	l, err := rwlock.New(c, rwlock.WithCleanupTimeout(500*time.Millisecond),
		rwlock.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	w, err := l.TryAcquireWrite(ctx(t), key, time.Minute)
	require.NoError(t, err)

	acl(user, "-evalsha", "-eval")
	w.Close() // NOPERM: the entry stays
	require.ErrorIs(t, w.Err(), rwlock.ErrReleased)
	require.Contains(t, e.entries(t, key), "w:"+w.OwnerToken(), "the failed Close left the entry")

	acl(user, "+evalsha", "+eval")
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
	release(t, w, rwlock.AlreadyReleased)
}

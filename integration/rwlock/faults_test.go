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
// or release whose reply is lost is reported as uncertain (never as success), an uncertain renewal keeps
// the lease, a retried owner-checked release settles it, and the server ends clean at the latest when the
// lease's TTL has passed.
func TestRWLockFaults(t *testing.T) {
	// the proxy drives single servers
	matrix.Run(t, matrix.Select(matrix.Targets(), matrix.Target.Standalone), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		t.Run("uncertain_acquire_is_not_success", func(t *testing.T) { faultUncertainAcquire(t, e) })
		t.Run("uncertain_extend_keeps_lease", func(t *testing.T) { faultUncertainExtend(t, e) })
		t.Run("uncertain_release_is_settled_by_retry", func(t *testing.T) { faultUncertainRelease(t, e) })
		t.Run("release_after_failed_close_still_releases", func(t *testing.T) { faultFailedClose(t, e) })
	})
}

// proxiedLocker returns a Locker whose client goes through a new fault proxy to the target, with a short
// cleanup timeout and a silent logger (the cleanup after a lost reply is expected to fail).
func proxiedLocker(t *testing.T, e *env) (*testkit.Proxy, *rwlock.Locker) {
	t.Helper()
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	c := proxy.Client(t, matrix.NoCache)
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
		p := e.PTTL(t, key)
		if p == -2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: lock key still present (PTTL %d ms, entries %v) after the lease's TTL + 1 s", what, p, keysOf(e.entries(t, key)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// heal ends the fault: Reset removes the toxic (and closes the connections whose replies were dropped)
// and CutConnections then tears those connections down at both ends before the client sends on them
// again. Without the cut, a command written to a half-closed connection can reach the server, and its
// reply then blocks a toxiproxy goroutine for ever (its timeout toxic's cleanup does not rewire the
// chain), which goleak reports.
func heal(t *testing.T, proxy *testkit.Proxy) {
	t.Helper()
	require.NoError(t, proxy.Reset())
	require.NoError(t, proxy.CutConnections())
}

// staleRetry runs op until it does not fail as uncertain, at most 5 times, and requires its success.
// heal closed the client's connection, and rueidis replaces a broken connection on the next command,
// so the first command after it may fail with a connection error (uncertain).
func staleRetry(t *testing.T, op func() error) {
	t.Helper()
	for try := 0; ; try++ {
		err := op()
		if err == nil {
			return
		}
		require.ErrorIs(t, err, rwlock.ErrUncertain)
		require.Less(t, try, 5, "still uncertain after reconnecting: %v", err)
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
	heal(t, proxy)

	e.requireGoneBy(t, key, sent.Add(faultTTL+time.Second), "after the uncertain acquisition")

	// The key is free again, through the same (reconnected) client.
	staleRetry(t, func() error {
		w, err = l.TryAcquireWrite(ctx(t), key, faultTTL)
		return err
	})
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// faultUncertainExtend: a renewal of a read lease whose reply is dropped returns false and ErrUncertain;
// the lease keeps vouching until its previous estimate (the renewal may or may not have run, and either
// way the entry lives at least that long), and a later renewal through the reconnected client succeeds.
func faultUncertainExtend(t *testing.T, e *env) {
	const key = "ck:rw:fault-extend"
	const ttl = 3 * time.Second // outlives the dropped renewal's 300 ms and the reconnection
	proxy, l := proxiedLocker(t, e)
	warm(t, l, key)
	r, err := l.TryAcquireRead(ctx(t), key, ttl)
	require.NoError(t, err)
	e.requireEntries(t, key, r)
	deadline := r.Deadline()

	require.NoError(t, proxy.DropReplies())
	ectx, cancel := dropped()
	ok, err := r.Extend(ectx)
	cancel()
	require.False(t, ok, "an uncertain renewal is never success")
	require.ErrorIs(t, err, rwlock.ErrUncertain)
	require.NoError(t, r.Err(), "an uncertain renewal keeps the lease")
	require.Equal(t, deadline, r.Deadline(), "the previous estimate is kept")
	require.Positive(t, r.Remaining())
	heal(t, proxy)

	staleRetry(t, func() error {
		ok, err = r.Extend(ctx(t))
		return err
	})
	require.True(t, ok, "the lease still holds its entry and renews")
	require.True(t, r.Deadline().After(deadline))
	e.requireEntries(t, key, r)
	release(t, r, rwlock.Released)
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
	heal(t, proxy)

	// The request reached the server, so the entry is gone (and would be after its TTL anyway).
	e.requireGoneBy(t, key, sent.Add(faultTTL+time.Second), "after the uncertain release")
	var out2 rwlock.ReleaseOutcome
	staleRetry(t, func() error { // the retried owner-checked release settles it
		out2, err = w.Release(ctx(t))
		return err
	})
	require.Equal(t, rwlock.AlreadyReleased, out2)
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
	c := e.NewClient(t, nil, func(o *rueidis.ClientOption) {
		o.DisableCache, o.Username, o.Password = true, user, "pw"
	})
	logs := &countingHandler{}
	l, err := rwlock.New(c, rwlock.WithCleanupTimeout(500*time.Millisecond), rwlock.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	w, err := l.TryAcquireWrite(ctx(t), key, time.Minute)
	require.NoError(t, err)

	acl(user, "-evalsha", "-eval")
	err = w.Close() // NOPERM: the entry stays
	require.ErrorIs(t, err, rwlock.ErrNoPermission)
	require.NotErrorIs(t, err, rwlock.ErrUncertain, "the server refused: the script did not run")
	require.EqualValues(t, 1, logs.warnings.Load(), "the failed Close is logged")
	require.ErrorIs(t, w.Err(), rwlock.ErrReleased)
	require.Contains(t, e.entries(t, key), "w:"+w.OwnerToken(), "the failed Close left the entry")

	acl(user, "+evalsha", "+eval")
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
	release(t, w, rwlock.AlreadyReleased)
}

package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

// TestLockFaults checks the lock's failure rules with injected faults on every standalone target of the
// matrix: replies lost after the server applied a command are reported as uncertain (never as success),
// and an asynchronous failover can reissue a fencing token, exactly as the package documents.
func TestLockFaults(t *testing.T) {
	// the proxy and replication helpers drive single servers
	matrix.Run(t, matrix.Select(matrix.Targets(), matrix.Target.Standalone), func(t *testing.T, mt matrix.Target) {
		loadGate.RLock()
		defer loadGate.RUnlock()
		t.Run("uncertain_acquire_is_not_success", func(t *testing.T) { testUncertainAcquire(t, mt.Server) })
		t.Run("uncertain_extend_keeps_estimate", func(t *testing.T) { testUncertainExtend(t, mt.Server) })
		t.Run("failover_can_reissue_token", func(t *testing.T) { testFailoverReissue(t, mt.Server) })
	})
}

// testUncertainAcquire: the acquire script reaches the server but its reply is dropped. TryAcquire must
// report ErrUncertain, never success; the counter shows the skipped token, and the owner-checked cleanup
// removed the lease.
func testUncertainAcquire(t *testing.T, target testkit.Target) {
	srv := testkit.Start(t, target)
	direct := srv.Client(t, matrix.NoCache)
	proxy := testkit.NewProxy(t, srv.Addr)
	c := proxy.Client(t, matrix.NoCache)
	lk, err := lock.New(c, lock.WithCleanupTimeout(300*time.Millisecond))
	require.NoError(t, err)
	name, leaseKey, fenceKey := named("uncertain-acquire")

	// Warm the connection and load the script, so the dropped reply is the script's.
	l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, l.FencingToken())
	out, err := l.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, lock.Released, out)

	require.NoError(t, proxy.DropReplies())
	actx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	l, err = lk.TryAcquire(actx, name, 10*time.Second)
	cancel()
	require.Nil(t, l)
	require.ErrorIs(t, err, lock.ErrUncertain, "a lost reply must be uncertain, got %v", err)
	require.NoError(t, proxy.Reset())

	// The server applied the acquisition: token 2 was issued (and skipped: nobody holds it). The
	// owner-checked cleanup was queued behind it on the same connection (commands carry no socket
	// deadline, so the client kept the connection), so the server ran it too, although its reply was
	// dropped as well: no lease is left behind.
	v, err := direct.Do(ctx(t), direct.B().Get().Key(fenceKey).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "2", v, "the uncertain acquisition advanced the counter")
	require.Eventually(t, func() bool {
		n, err := direct.Do(ctx(t), direct.B().Exists().Key(leaseKey).Build()).AsInt64()
		return err == nil && n == 0
	}, 5*time.Second, 20*time.Millisecond, "the cleanup release must reach the server behind the acquisition")
}

// testUncertainExtend: a renewal whose reply is lost returns ErrUncertain and leaves the handle's
// estimate as it was (a renewal can only lengthen the lease, so the old estimate stays safe).
func testUncertainExtend(t *testing.T, target testkit.Target) {
	srv := testkit.Start(t, target)
	proxy := testkit.NewProxy(t, srv.Addr)
	c := proxy.Client(t, matrix.NoCache)
	lk, err := lock.New(c)
	require.NoError(t, err)
	name, leaseKey, _ := named("uncertain-extend")
	l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
	require.NoError(t, err)
	deadline := l.Deadline()

	require.NoError(t, proxy.DropReplies())
	ectx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	ok, err := l.Extend(ectx)
	cancel()
	require.False(t, ok)
	require.ErrorIs(t, err, lock.ErrUncertain)
	require.NoError(t, l.Err(), "an uncertain renewal does not end the handle")
	require.Equal(t, deadline, l.Deadline(), "an uncertain renewal does not move the estimate")
	require.NoError(t, proxy.Reset())

	direct := srv.Client(t, matrix.NoCache)
	v, err := direct.Do(ctx(t), direct.B().Get().Key(leaseKey).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, l.OwnerToken(), v, "the lease is still this owner's")
	_, err = direct.Do(ctx(t), direct.B().Del().Key(leaseKey).Build()).AsInt64()
	require.NoError(t, err)
}

// testFailoverReissue: an increment that never reached the replica is lost when the replica is
// promoted, so the next owner on the new primary receives a token that was already issued. This is the
// documented non-guarantee ("not globally monotonic"), asserted so the documentation stays true.
func testFailoverReissue(t *testing.T, target testkit.Target) {
	rep := testkit.StartReplicated(t, target)
	primary := rep.Primary.Client(t, matrix.NoCache)
	lk, err := lock.New(primary)
	require.NoError(t, err)
	name, _, _ := named("failover")
	for want := int64(1); want <= 3; want++ {
		l, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, want, l.FencingToken())
		_, err = l.Release(ctx(t))
		require.NoError(t, err)
	}
	require.NoError(t, rep.WaitSync(ctx(t)))
	require.NoError(t, rep.HoldReplication())
	lost, err := lk.TryAcquire(ctx(t), name, 10*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 4, lost.FencingToken())

	require.NoError(t, rep.Failover(ctx(t), testkit.FailoverOptions{OldPrimary: testkit.KillOldPrimary}))
	promoted := rep.Primary.Client(t, matrix.NoCache)
	lk2, err := lock.New(promoted)
	require.NoError(t, err)
	l, err := lk2.TryAcquire(ctx(t), name, 10*time.Second)
	require.NoError(t, err, "the lost lease is gone with the old primary")
	require.EqualValues(t, 4, l.FencingToken(), "token 4 is issued a second time after the failover")
	if _, err := l.Release(ctx(t)); err != nil && !errors.Is(err, lock.ErrUncertain) {
		require.NoError(t, err)
	}
	// The lost handle can no longer verify: its lease never reached the promoted server.
	_, _ = lost.Release(context.Background())
}

package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/testkit"
)

// TestRWLockCleanupAfterFailedAcquire checks that the owner-checked release after a cancelled or late
// acquisition is sent. The acquisitions go through a proxy that
// delays replies, so the script runs on the server at once and only its reply is late; standalone
// targets only (a proxy in front of one Cluster node would be bypassed by redirects).
func TestRWLockCleanupAfterFailedAcquire(t *testing.T) {
	matrix.Run(t, matrix.Select(matrix.Targets(), matrix.Target.Standalone), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		t.Run("cleanup_after_cancelled_acquire_is_sent", func(t *testing.T) { testCleanupCancelled(t, e) })
		t.Run("cleanup_after_late_acquire_is_sent", func(t *testing.T) { testCleanupLate(t, e) })
	})
}

// testCleanupCancelled: an acquisition whose ctx ends before its delayed reply is uncertain; the entry
// it wrote (with a 30 s TTL) is removed by the owner-checked cleanup long before the TTL.
func testCleanupCancelled(t *testing.T, e *env) {
	p := testkit.NewProxy(t, e.Srv.Addr)
	l, err := rwlock.New(p.Client(t), rwlock.WithCleanupTimeout(2*time.Second))
	require.NoError(t, err)
	for _, mode := range []string{"read", "write"} {
		key := "ck:rw:cleanup:cancelled:" + mode
		acquire := l.TryAcquireWrite
		if mode == "read" {
			acquire = l.TryAcquireRead
		}
		// Warm: the connection dialled and the script cached, so that the acquisition is one EVALSHA
		// written at once (a command queued behind a delayed handshake or NOSCRIPT is never sent).
		warm, err := acquire(ctx(t), key, time.Second)
		require.NoError(t, err)
		release(t, warm, rwlock.Released)
		require.NoError(t, p.AddLatency(300*time.Millisecond))
		actx, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
		lease, err := acquire(actx, key, 30*time.Second)
		cancel()
		require.ErrorIs(t, err, rwlock.ErrUncertain, mode)
		require.Nil(t, lease)
		require.NoError(t, p.Reset())
		eventually(t, 10*time.Second, "the cleanup to remove the "+mode+" entry (TTL 30s)", func() bool {
			return len(e.entries(t, key)) == 0
		})
		e.requireAbsent(t, key)
	}
}

// testCleanupLate: an acquisition whose reply arrives after its local estimate elapsed is ErrLateReply,
// and an owner-checked release follows it: the server runs two scripts for the one call.
func testCleanupLate(t *testing.T, e *env) {
	p := testkit.NewProxy(t, e.Srv.Addr)
	l, err := rwlock.New(p.Client(t), rwlock.WithCleanupTimeout(2*time.Second))
	require.NoError(t, err)
	key := "ck:rw:cleanup:late"
	w, err := l.TryAcquireWrite(ctx(t), key, time.Second) // warm: scripts cached, connection dialled
	require.NoError(t, err)
	release(t, w, rwlock.Released)
	require.NoError(t, p.AddLatency(400*time.Millisecond))
	before := e.CommandStats(t)
	lease, err := l.TryAcquireWrite(ctx(t), key, 200*time.Millisecond)
	require.ErrorIs(t, err, rwlock.ErrLateReply)
	require.Nil(t, lease)
	eventually(t, 10*time.Second, "the acquisition and its cleanup to run", func() bool {
		return sumEval(e.CommandStats(t))-sumEval(before) >= 2
	})
	require.NoError(t, p.Reset())
	require.EqualValues(t, 2, sumEval(e.CommandStats(t))-sumEval(before), "one acquisition and one owner-checked release")
	e.requireAbsent(t, key)
}

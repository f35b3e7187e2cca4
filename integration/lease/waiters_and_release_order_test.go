package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
)

// TestLeaseReleaseOrder checks, behind a proxy in front of one server (standalone targets with
// hash-field expiry), that a release queued behind an in-flight extend is sent after it. The cleanup
// after an uncertain acquisition is TestLeaseFaults' uncertain_acquire_is_not_success; after a late
// one, integration/rwlock's TestRWLockCleanupAfterFailedAcquire (one ownership.Grant for both).
func TestLeaseReleaseOrder(t *testing.T) {
	matrix.Run(t, matrix.Select(matrix.Targets(), proxiable), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		t.Run("release_queued_behind_extend", func(t *testing.T) { testReleaseQueued(t, e) })
	})
}

// testAnyFieldWakesEvery: two waiters of one tracked Leases, on two held fields of one hash, both
// wake (one more attempt each) when a third field of the hash is written, and again when it is
// deleted.
func testAnyFieldWakesEvery(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s19")
	holder := e.leases(t)
	tr := luakit.NewTracker()
	// A nil invalidation (rueidis sends one when a tracked connection is reset, which a Cluster
	// client's topology refresh can do) rightly wakes every waiter once more: count them, so each
	// step allows one extra attempt per waiter per wake-all and none otherwise.
	var wakeAlls atomic.Int64
	countWakeAlls := func(o *rueidis.ClientOption) {
		o.OnInvalidations = func(msgs []rueidis.RedisMessage) {
			if msgs == nil {
				wakeAlls.Add(1)
			}
		}
	}
	waiters := newLeases(t, e.NewClient(t, tr, countWakeAlls), lease.WithTracker(tr))
	ha, err := holder.TryAcquire(c, key, "a", 30*time.Second)
	require.NoError(t, err)
	hb, err := holder.TryAcquire(c, key, "b", 30*time.Second)
	require.NoError(t, err)
	scripts := func() int64 { return e.CommandStats(t)["evalsha"] }
	waitScripts := func(base, want int64, why string) {
		t.Helper()
		require.Eventually(t, func() bool { return scripts()-base >= want }, 5*time.Second, 20*time.Millisecond, why)
		time.Sleep(200 * time.Millisecond)
		got, extra := scripts()-base, 2*wakeAlls.Load()
		if extra == 0 {
			require.Equal(t, want, got, "%s: no further attempts", why)
			return
		}
		require.LessOrEqual(t, got, want+extra, "%s: no further attempts beyond the %d wake-alls", why, extra/2)
		t.Logf("%s: %d attempts, %d wake-all invalidations seen", why, got, extra/2)
	}
	base := scripts()
	chA := acquireAsync(c, waiters, key, "a", 30*time.Second)
	chB := acquireAsync(c, waiters, key, "b", 30*time.Second)
	waitScripts(base, 4, "each waiter's first attempt and its re-check after arming")
	e.do(t, "HSET", key, "c", "v")
	waitScripts(base, 6, "a write to a third field wakes both waiters")
	e.do(t, "HDEL", key, "c")
	waitScripts(base, 8, "so does deleting it")

	release(t, ha, lease.Released)
	release(t, hb, lease.Released)
	for _, ch := range []<-chan acquired{chA, chB} {
		r := await(t, ch, 5*time.Second)
		require.NoError(t, r.err)
		release(t, r.lease, lease.Released)
	}
	e.requireAbsent(t, key, "hash key")
}

// testReleaseQueued: a release queued behind an in-flight operation waits for it only as long as its
// ctx allows (lease's doc says why): a Release whose ctx ends while an Extend is in flight returns an
// error wrapping ctx.Err(), sends nothing and leaves the lease vouching; a later Release, once the
// Extend returned, removes the field.
func testReleaseQueued(t *testing.T, e *env) {
	key, field := hashKey("s20"), "f"
	proxy, _, ls := proxiedLeases(t, e)
	warm(t, ls, key, field)
	l, err := ls.TryAcquire(ctx(t), key, field, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, proxy.AddLatency(500*time.Millisecond))
	extended := make(chan error, 1)
	go func() {
		ok, err := l.Extend(context.Background())
		if err == nil && !ok {
			err = context.Canceled // any non-nil value: the Extend did not hold
		}
		extended <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the Extend take the handle's turn
	rctx, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	_, err = l.Release(rctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the queued Release's ctx bounds its wait")
	require.NoError(t, <-extended, "the in-flight Extend holds")
	require.NoError(t, proxy.Reset())
	require.NoError(t, l.Err(), "nothing sent: the lease still vouches")
	e.requireHeld(t, key, field, l.OwnerToken())
	release(t, l, lease.Released)
	e.requireFieldAbsent(t, key, field)
}

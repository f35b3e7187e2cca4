package lock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// 14. A waiter wired with a tracker but on a cache-disabled client (no invalidation can ever arrive)
// still acquires a lease that had no expiry once it is deleted: it re-checks on the untracked interval
// instead of sleeping forever.
func testUntrackedNoExpiry(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, _ := named("s14")
	tr := luakit.NewTracker()
	waiter := newLocker(t, e.NewClient(t, tr, matrix.NoCache), lock.WithTracker(tr))
	e.do(t, "SET", lk, "foreign-holder-without-expiry")

	ch := acquireAsync(c, waiter, ln, 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	e.do(t, "DEL", lk)
	deleted := time.Now()
	r := await(t, ch, 10*time.Second) // generous: the untracked re-check interval is 1 s
	require.NoError(t, r.err)
	t.Logf("acquired %v after the foreign lease was deleted (untracked re-check)", r.at.Sub(deleted).Round(time.Millisecond))
	e.requireLease(t, lk, r.lease.OwnerToken())
	release(t, r.lease, lock.Released)
	e.requireAbsent(t, lk, "lease key")
}

// 18. ExtendTTL changes the lease's TTL, in whole milliseconds on the server and in the handle (its
// estimate never outlives the server's lease), and later renewals keep it; a TTL under 1ms is refused
// before any I/O and leaves the lease as it was (PEXPIRE 0 would delete it).
func testExtendTTL(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, _ := named("s18")
	h, err := e.locker(t).TryAcquire(c, ln, 2*time.Second)
	require.NoError(t, err)
	token := h.FencingToken()

	for _, bad := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
		ok, err := h.ExtendTTL(c, bad)
		require.False(t, ok)
		require.ErrorIs(t, err, lock.ErrInvalidTTL, "ExtendTTL(%v)", bad)
	}
	require.NoError(t, h.Err())
	e.requireLease(t, lk, h.OwnerToken())

	sent := time.Now()
	ok, err := h.ExtendTTL(c, 20*time.Second+500*time.Microsecond)
	returned := time.Now()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 20*time.Second, h.TTL(), "the TTL is kept in whole milliseconds")
	step := ownership.ServerClockStep // the estimate leaves the servers' millisecond step
	require.False(t, h.Deadline().Before(sent.Add(20*time.Second-step)), "the estimate moved to the renewal's send time + TTL")
	require.False(t, h.Deadline().After(returned.Add(20*time.Second-step)), "the estimate runs from before the send")
	p := e.PTTL(t, lk)
	require.Greater(t, p, int64(10_000), "the server's lease has the new TTL")
	require.LessOrEqual(t, p, int64(20_000))

	ok, err = h.Extend(c) // at the new TTL
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, e.PTTL(t, lk), int64(10_000))
	require.Equal(t, token, h.FencingToken())
	release(t, h, lock.Released)
	e.requireAbsent(t, lk, "lease key")
}

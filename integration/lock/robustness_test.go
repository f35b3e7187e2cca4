package lock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// 14. A waiter wired with a tracker but on a cache-disabled client (no invalidation can ever arrive)
// still acquires a lease that had no expiry once it is deleted: it re-checks on the untracked interval
// instead of sleeping forever.
func testUntrackedNoExpiry(t *testing.T, e *env) {
	c := ctx(t)
	lk, fk := keyPair("s14")
	tr := luakit.NewTracker()
	waiter := newLocker(t, e.newClient(t, tr, nil, func(o *rueidis.ClientOption) { o.DisableCache = true }), lock.WithTracker(tr))
	e.do(t, "SET", lk, "foreign-holder-without-expiry")

	ch := acquireAsync(c, waiter, lk, fk, 5*time.Second)
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

// 15. Concurrent Release calls on one handle agree: exactly one Released, the rest AlreadyReleased,
// never NotOwned for a lease this handle itself deleted.
func testConcurrentRelease(t *testing.T, e *env) {
	c := ctx(t)
	lk, fk := keyPair("s15")
	lkr := e.locker(t)
	for round := 0; round < 50; round++ {
		h, err := lkr.TryAcquire(c, lk, fk, 10*time.Second)
		require.NoError(t, err)
		const callers = 4
		outcomes := make([]lock.ReleaseOutcome, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := h.Release(c)
				require.NoError(t, err)
				outcomes[i] = out
			}()
		}
		wg.Wait()
		count := map[lock.ReleaseOutcome]int{}
		for _, o := range outcomes {
			count[o]++
		}
		require.Equal(t, map[lock.ReleaseOutcome]int{lock.Released: 1, lock.AlreadyReleased: callers - 1}, count, "round %d", round)
		e.requireAbsent(t, lk, "lease key")
	}
}

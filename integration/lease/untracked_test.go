package lease_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
)

// 15. A waiter wired with a tracker but on a cache-disabled client (no invalidation can ever arrive)
// still acquires a field that had no expiry once it is deleted: it re-checks on the untracked interval
// instead of sleeping until ctx ends.
func testUntrackedNoExpiry(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s15")
	tr := luakit.NewTracker()
	waiter := newLeases(t, e.newClient(t, tr, func(o *rueidis.ClientOption) { o.DisableCache = true }), lease.WithTracker(tr))
	e.do(t, "HSET", key, "job", "foreign-holder-without-expiry")

	ch := acquireAsync(c, waiter, key, "job", 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	e.do(t, "HDEL", key, "job")
	r := await(t, ch, 10*time.Second) // generous: the untracked re-check interval is 1 s
	require.NoError(t, r.err)
	e.requireHeld(t, key, "job", r.lease.OwnerToken())
	release(t, r.lease, lease.Released)
	e.requireFieldAbsent(t, key, "job")
}

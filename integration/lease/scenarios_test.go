package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
)

// 0. Redis 7.0 / Valkey 8: every call fails before writing, naming the feature and minimum servers.
func testUnsupported(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s0")
	ls := e.leases(t)
	check := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, luakit.ErrUnsupported)
		var ue *luakit.UnsupportedError
		require.ErrorAs(t, err, &ue)
		for _, s := range []string{"hash-field expiry", "HPEXPIRE", "Redis 7.4", "Valkey 9.0"} {
			require.Contains(t, err.Error(), s)
		}
	}
	l, err := ls.TryAcquire(c, key, "f", 10*time.Second)
	require.Nil(t, l)
	check(err)
	l, err = ls.Acquire(c, key, "f", 10*time.Second)
	require.Nil(t, l)
	check(err)
	_, err = ls.Inspect(c, key)
	check(err)
	e.requireAbsent(t, key, "hash key")
	// An existing hash is not touched either.
	e.do(t, "HSET", key, "other", "v")
	_, err = ls.TryAcquire(c, key, "f", 10*time.Second)
	check(err)
	n, err := e.do(t, "HLEN", key).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	e.requireFieldAbsent(t, key, "f")
	e.do(t, "DEL", key)
	e.requireAbsent(t, key, "hash key")
}

// 1. N goroutines contend for one field with a long TTL: at most one holder at every instant (checked
// with an atomic counter while holding, and against the server), every acquisition released.
func testContention(t *testing.T, e *env) {
	const (
		workers = 6
		rounds  = 5
	)
	c := ctx(t)
	key := hashKey("s1")
	var (
		holders  atomic.Int32
		maxSeen  atomic.Int32
		acquired atomic.Int32
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	for w := 0; w < workers; w++ {
		ls := e.trackedLeases(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				l, err := ls.Acquire(c, key, "job", 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				n := holders.Add(1)
				for {
					m := maxSeen.Load()
					if n <= m || maxSeen.CompareAndSwap(m, n) {
						break
					}
				}
				if v, _ := e.Raw.Do(c, e.Raw.B().Hget().Key(key).Field("job").Build()).ToString(); v != l.OwnerToken() {
					errs <- errors.New("server field does not hold the current holder's token")
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				acquired.Add(1)
				if o, err := l.Release(context.WithoutCancel(c)); err != nil || o != lease.Released {
					errs <- errors.Join(err, errors.New("release outcome "+o.String()))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, maxSeen.Load(), "at most one holder at every instant")
	require.EqualValues(t, workers*rounds, acquired.Load())
	e.requireAbsent(t, key, "hash key")
}

// 2. Two fields of one hash are independent leases.
func testFieldsIndependent(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s2")
	a, b := e.leases(t), e.leases(t)
	la, err := a.TryAcquire(c, key, "f1", 30*time.Second)
	require.NoError(t, err)
	lb, err := b.TryAcquire(c, key, "f2", 30*time.Second)
	require.NoError(t, err, "another field of the same hash is free")
	_, err = b.TryAcquire(c, key, "f1", 30*time.Second)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	e.requireHeld(t, key, "f1", la.OwnerToken())
	e.requireHeld(t, key, "f2", lb.OwnerToken())

	release(t, la, lease.Released)
	e.requireFieldAbsent(t, key, "f1")
	e.requireHeld(t, key, "f2", lb.OwnerToken())
	ok, err := lb.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	release(t, lb, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// 3. A holder that never releases: the waiter's Acquire gets the field within TTL + 500 ms, with and
// without tracking; the old handle then reports loss and cannot release the replacement.
func testHandoffExpiry(t *testing.T, e *env) {
	const ttl = 500 * time.Millisecond
	for _, tracked := range []bool{false, true} {
		name := map[bool]string{false: "hpttl_only", true: "tracked"}[tracked]
		t.Run(name, func(t *testing.T) {
			c := ctx(t)
			key := hashKey("s3:" + name)
			holder := e.leases(t)
			waiter := e.leases(t)
			if tracked {
				waiter = e.trackedLeases(t)
			}
			h, err := holder.TryAcquire(c, key, "f", ttl)
			require.NoError(t, err)
			granted := time.Now()
			r := await(t, acquireAsync(c, waiter, key, "f", 10*time.Second), 10*time.Second)
			require.NoError(t, r.err)
			took := r.at.Sub(granted)
			t.Logf("expiry hand-off after %v (ttl %v)", took, ttl)
			require.Less(t, took, ttl+500*time.Millisecond)
			require.True(t, r.at.After(h.Deadline()), "new owner granted before the old handle's deadline")

			select {
			case <-h.Done():
			case <-time.After(time.Second):
				t.Fatal("the expired holder's handle did not end")
			}
			require.ErrorIs(t, h.Err(), lease.ErrExpired)
			release(t, h, lease.NotOwned)
			e.requireHeld(t, key, "f", r.lease.OwnerToken())
			release(t, r.lease, lease.Released)
			e.requireAbsent(t, key, "hash key")
		})
	}
}

// 4. A stale owner (its field deleted and taken by another owner while its estimate still ran) cannot
// extend, verify or release the replacement lease: the server's owner check ends its handle with
// ErrLost, and the replacement stays intact (value and expiry).
func testOwnerIsolation(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s4")
	a, b := e.leases(t), e.leases(t)
	old, err := a.TryAcquire(c, key, "f", 30*time.Second)
	require.NoError(t, err)
	e.do(t, "HDEL", key, "f")
	repl, err := b.TryAcquire(c, key, "f", 5*time.Second)
	require.NoError(t, err)
	before := e.hpttl(t, key, "f")

	ok, err := old.Extend(c)
	require.NoError(t, err)
	require.False(t, ok, "a stale owner must not renew the replacement")
	require.ErrorIs(t, old.Err(), lease.ErrLost)
	ok, err = old.Verify(c)
	require.NoError(t, err)
	require.False(t, ok)
	release(t, old, lease.NotOwned)

	e.requireHeld(t, key, "f", repl.OwnerToken())
	require.LessOrEqual(t, e.hpttl(t, key, "f"), before, "the replacement's expiry must not be extended")
	require.NoError(t, repl.Err())
	release(t, repl, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// 5. Renewing and releasing one field never touches another owner's field (value or expiry), even after
// the first lease expired.
func testOtherFieldUntouched(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s5")
	a, b := e.leases(t), e.leases(t)
	la, err := a.TryAcquire(c, key, "mine", 30*time.Second)
	require.NoError(t, err)
	lb, err := b.TryAcquire(c, key, "theirs", 5*time.Second)
	require.NoError(t, err)

	ok, err := la.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	require.LessOrEqual(t, e.hpttl(t, key, "theirs"), int64(5000), "another field's expiry must not move")
	release(t, la, lease.Released)
	e.requireHeld(t, key, "theirs", lb.OwnerToken())

	// An expired lease on a field that another owner then took: nothing of ours touches it.
	short, err := a.TryAcquire(c, key, "mine", 30*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	other, err := b.TryAcquire(c, key, "mine", 5*time.Second)
	require.NoError(t, err)
	ok, err = short.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	release(t, short, lease.NotOwned)
	e.requireHeld(t, key, "mine", other.OwnerToken())
	e.requireHeld(t, key, "theirs", lb.OwnerToken())
	release(t, other, lease.Released)
	release(t, lb, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// 6. A hash key with a key-level expiry is rejected with ErrExpiringHash (Acquire does not wait on it);
// a key of another type fails with WRONGTYPE; nothing is written in either case.
func testExpiringHash(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s6")
	ls := e.leases(t)
	e.do(t, "HSET", key, "other", "v")
	e.do(t, "PEXPIRE", key, "600000")
	l, err := ls.TryAcquire(c, key, "f", 10*time.Second)
	require.Nil(t, l)
	require.ErrorIs(t, err, lease.ErrExpiringHash)
	l, err = ls.Acquire(c, key, "f", 10*time.Second)
	require.Nil(t, l)
	require.ErrorIs(t, err, lease.ErrExpiringHash)
	e.requireFieldAbsent(t, key, "f")
	n, err := e.do(t, "HLEN", key).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Greater(t, e.PTTL(t, key), int64(0), "the hash keeps its expiry")
	e.do(t, "DEL", key)

	e.do(t, "SET", key, "a string")
	_, err = ls.TryAcquire(c, key, "f", 10*time.Second)
	require.Error(t, err)
	require.Contains(t, err.Error(), "WRONGTYPE")
	v, err := e.do(t, "GET", key).ToString()
	require.NoError(t, err)
	require.Equal(t, "a string", v)
	e.do(t, "DEL", key)
	e.requireAbsent(t, key, "hash key")
}

// 7. Binary hash keys and fields with a binary prefix: the physical key is prefix+key, the field is
// stored byte for byte, the unprefixed key is never written.
func testPrefixBinary(t *testing.T, e *env) {
	c := ctx(t)
	const (
		prefix = "\x00pfx\xff:"
		key    = "h\x00\xfe\r\nk"
		field  = "f\x00\xff \"'\\"
	)
	ls := e.trackedLeases(t, lease.WithKeyPrefix(prefix))
	l, err := ls.TryAcquire(c, key, field, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, key, l.HashKey())
	require.Equal(t, field, l.Name())
	e.requireHeld(t, prefix+key, field, l.OwnerToken())
	e.requireAbsent(t, key, "unprefixed hash key")
	in, err := ls.Inspect(c, key)
	require.NoError(t, err)
	require.Len(t, in.Holders, 1)
	require.Equal(t, field, in.Holders[0].Field)

	// A waiter on the binary key wakes on release.
	ch := acquireAsync(c, ls, key, field, 30*time.Second)
	time.Sleep(100 * time.Millisecond)
	release(t, l, lease.Released)
	r := await(t, ch, 5*time.Second)
	require.NoError(t, r.err)
	e.requireHeld(t, prefix+key, field, r.lease.OwnerToken())
	ok, err := r.lease.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	release(t, r.lease, lease.Released)
	e.requireAbsent(t, prefix+key, "prefixed hash key")
}

// 8. Bad input fails before any I/O and writes nothing.
func testBadInput(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s8")
	ls := e.leases(t)
	cases := []struct {
		name       string
		key, field string
		ttl        time.Duration
		want       error
	}{
		{"empty_key", "", "f", time.Second, luakit.ErrEmptyKey},
		{"empty_field", key, "", time.Second, lease.ErrEmptyField},
		{"zero_ttl", key, "f", 0, lease.ErrInvalidTTL},
		{"sub_ms_ttl", key, "f", 900 * time.Microsecond, lease.ErrInvalidTTL},
		{"negative_ttl", key, "f", -time.Second, lease.ErrInvalidTTL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ls.TryAcquire(c, tc.key, tc.field, tc.ttl)
			require.Nil(t, l)
			require.ErrorIs(t, err, tc.want)
			l, err = ls.Acquire(c, tc.key, tc.field, tc.ttl)
			require.Nil(t, l)
			require.ErrorIs(t, err, tc.want)
			e.requireAbsent(t, key, "hash key")
		})
	}
	_, err := ls.Inspect(c, "")
	require.ErrorIs(t, err, luakit.ErrEmptyKey)
	_, err = lease.New(nil)
	require.ErrorIs(t, err, lease.ErrNilClient)
}

// 9. Inspect lists every field with its remaining life, sorted by field; never owner tokens. A field
// without expiry is NoExpiry with Remaining 0.
func testInspect(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s9")
	ls := e.leases(t)
	in, err := ls.Inspect(c, key)
	require.NoError(t, err)
	require.False(t, in.Exists, "absent hash")
	require.Empty(t, in.Holders, "absent hash")

	l1, err := ls.TryAcquire(c, key, "b", 30*time.Second)
	require.NoError(t, err)
	l2, err := ls.TryAcquire(c, key, "a", 10*time.Second)
	require.NoError(t, err)
	e.do(t, "HSET", key, "raw", "no-expiry")
	in, err = ls.Inspect(c, key)
	require.NoError(t, err)
	require.True(t, in.Exists)
	hs := in.Holders
	require.Len(t, hs, 3)
	require.Equal(t, []string{"a", "b", "raw"}, []string{hs[0].Field, hs[1].Field, hs[2].Field})
	require.Greater(t, hs[0].Remaining, 9*time.Second)
	require.LessOrEqual(t, hs[0].Remaining, 10*time.Second)
	require.Greater(t, hs[1].Remaining, 29*time.Second)
	require.LessOrEqual(t, hs[1].Remaining, 30*time.Second)
	require.Equal(t, lease.Holder{Field: "raw", NoExpiry: true}, hs[2])

	// The raw field (no expiry) counts as held forever.
	_, err = ls.TryAcquire(c, key, "raw", time.Second)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	release(t, l1, lease.Released)
	release(t, l2, lease.Released)
	in, err = ls.Inspect(c, key)
	require.NoError(t, err)
	require.Equal(t, lease.Inspection{Exists: true, Holders: []lease.Holder{{Field: "raw", NoExpiry: true}}}, in)
	e.do(t, "DEL", key)
	e.requireAbsent(t, key, "hash key")
}

// 10. Cancelling a waiting Acquire returns promptly with an error wrapping context.Canceled and leaves
// the holder intact.
func testCancelWaiting(t *testing.T, e *env) {
	for _, tracked := range []bool{false, true} {
		name := map[bool]string{false: "hpttl_only", true: "tracked"}[tracked]
		t.Run(name, func(t *testing.T) {
			c := ctx(t)
			key := hashKey("s10:" + name)
			holder := e.leases(t)
			waiter := e.leases(t)
			if tracked {
				waiter = e.trackedLeases(t)
			}
			h, err := holder.TryAcquire(c, key, "f", 30*time.Second)
			require.NoError(t, err)
			wctx, cancel := context.WithCancel(c)
			defer cancel()
			ch := acquireAsync(wctx, waiter, key, "f", 30*time.Second)
			time.Sleep(200 * time.Millisecond) // let it attempt and start waiting
			cancelled := time.Now()
			cancel()
			r := await(t, ch, 5*time.Second)
			require.Nil(t, r.lease)
			require.ErrorIs(t, r.err, context.Canceled)
			require.Less(t, r.at.Sub(cancelled), time.Second, "cancelled Acquire must return promptly")
			e.requireHeld(t, key, "f", h.OwnerToken())
			release(t, h, lease.Released)
			e.requireAbsent(t, key, "hash key")
		})
	}
}

// 11. Release twice → Released then AlreadyReleased; the handle ends with ErrReleased and Extend
// returns false without touching the server.
func testReleaseOutcomes(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s11")
	ls := e.leases(t)
	l, err := ls.TryAcquire(c, key, "f", 30*time.Second)
	require.NoError(t, err)
	release(t, l, lease.Released)
	release(t, l, lease.AlreadyReleased)
	require.ErrorIs(t, l.Err(), lease.ErrReleased)
	ok, err := l.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	e.requireAbsent(t, key, "hash key")
}

// 12. Every script recovers from an empty script cache (EVALSHA → NOSCRIPT → EVAL).
func testNoScript(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s12")
	ls := e.leases(t)
	e.scriptFlush(t)
	l, err := ls.TryAcquire(c, key, "f", 30*time.Second)
	require.NoError(t, err)
	e.scriptFlush(t)
	ok, err := l.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	e.scriptFlush(t)
	ok, err = l.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	e.scriptFlush(t)
	in, err := ls.Inspect(c, key)
	require.NoError(t, err)
	require.Len(t, in.Holders, 1)
	e.requireHeld(t, key, "f", l.OwnerToken())
	e.scriptFlush(t)
	release(t, l, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// 13. A lease whose local estimate elapsed is never revived, even while the field still holds this
// owner's token (here its server expiry was lengthened externally): Extend returns false without
// touching the field, Done and Context stay the ones that ended, and Release still deletes the field.
func testNoRevivalAfterEstimate(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s13")
	ls := e.leases(t)
	l, err := ls.TryAcquire(c, key, "f", 300*time.Millisecond)
	require.NoError(t, err)
	e.do(t, "HPEXPIRE", key, "60000", "FIELDS", "1", "f")
	done, lctx := l.Done(), l.Context()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("local estimate did not elapse")
	}
	require.ErrorIs(t, l.Err(), lease.ErrExpired)
	ok, err := l.Extend(c)
	require.NoError(t, err)
	require.False(t, ok, "an ended lease is never revived")
	require.ErrorIs(t, l.Err(), lease.ErrExpired)
	require.Zero(t, l.Remaining())
	require.Equal(t, done, l.Done(), "Done is fixed for the lease's life")
	require.Equal(t, lctx, l.Context(), "Context is fixed for the lease's life")
	require.Greater(t, e.hpttl(t, key, "f"), int64(50000), "Extend on an ended lease sends nothing")
	e.requireHeld(t, key, "f", l.OwnerToken())
	release(t, l, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// 14. Contexts that ended before the call: an acquisition, a renewal or a release sends nothing (the
// error wraps ctx.Err() and is not uncertain), writes nothing, and leaves a held lease vouching as
// before.
func testEndedContext(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s14")
	ls := e.leases(t)
	_, err := ls.Inspect(c, key) // probe the feature now, so the cancelled call would reach the script
	require.NoError(t, err)
	dead, cancel := context.WithCancel(c)
	cancel()
	for range 20 {
		l, err := ls.TryAcquire(dead, key, "f", 30*time.Second)
		require.Nil(t, l)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, lease.ErrUncertain, "nothing was sent")
	}
	e.requireAbsent(t, key, "hash key")

	l, err := ls.TryAcquire(c, key, "f", 30*time.Second)
	require.NoError(t, err)
	deadline := l.Deadline()
	ok, err := l.Extend(dead)
	require.False(t, ok)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, lease.ErrUncertain, "nothing was sent")
	require.NoError(t, l.Err(), "the lease still vouches")
	require.Equal(t, deadline, l.Deadline())
	_, err = l.Release(dead)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, l.Err(), "nothing was sent: the lease still vouches")
	e.requireHeld(t, key, "f", l.OwnerToken())

	ok, err = l.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	release(t, l, lease.Released)
	release(t, l, lease.AlreadyReleased)
	e.requireAbsent(t, key, "hash key")
}

// 16. KeepAlive keeps the field held across several TTLs, refuses a second keep-alive, and Release stops
// it (its goroutine exits: goleak checks the package) and deletes the field. The TTL leaves each
// renewal (every quarter TTL) 750ms of slack on a loaded machine.
func testKeepAlive(t *testing.T, e *env) {
	const ttl = time.Second
	c := ctx(t)
	key := hashKey("s16")
	ls := e.leases(t, lease.WithRenewFraction(0.25))
	l, err := ls.TryAcquire(c, key, "f", ttl)
	require.NoError(t, err)
	require.NoError(t, l.KeepAlive(c))
	require.ErrorIs(t, l.KeepAlive(c), lease.ErrKeepAliveRunning)
	select {
	case <-l.Done():
		t.Fatalf("the kept-alive lease ended: %v", l.Err())
	case <-time.After(3 * ttl):
	}
	require.NoError(t, l.Err())
	require.Greater(t, l.Remaining(), time.Duration(0))
	e.requireHeld(t, key, "f", l.OwnerToken())
	require.LessOrEqual(t, e.hpttl(t, key, "f"), ttl.Milliseconds(), "renewed at the lease's own TTL")
	release(t, l, lease.Released)
	require.ErrorIs(t, l.Err(), lease.ErrReleased)
	e.requireAbsent(t, key, "hash key")
}

// 17. Waiters watch the whole hash: a write to another field of the hash wakes a waiter, which makes
// one more attempt (one more acquire script, counted on the servers) and waits again; its field's
// release then hands it the lease. The waiter's client is built by luakit.NewTrackedClient and its
// Leases has no WithTracker: the tracker is found on the client.
func testAnyFieldWakes(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s17")
	holder := e.leases(t)
	waiter := newLeases(t, e.NewClient(t, luakit.NewTracker()))
	h, err := holder.TryAcquire(c, key, "f", 30*time.Second)
	require.NoError(t, err)
	scripts := func() int64 { return e.CommandStats(t)["evalsha"] }
	// waitScripts waits until the servers ran want acquire scripts since base (it never sees more: the
	// waiter sleeps until an invalidation or the holder's 30 s TTL).
	waitScripts := func(base, want int64, why string) {
		t.Helper()
		require.Eventually(t, func() bool { return scripts()-base >= want }, 5*time.Second, 20*time.Millisecond, why)
		time.Sleep(200 * time.Millisecond)
		require.Equal(t, want, scripts()-base, "%s: no further attempts", why)
	}
	base := scripts()
	ch := acquireAsync(c, waiter, key, "f", 30*time.Second)
	// The first busy attempt is tried again once tracking is armed (the hash survives a release, so
	// a release between the attempt and the arming read must not be slept through).
	waitScripts(base, 2, "first attempt and its re-check after arming")

	e.do(t, "HSET", key, "other", "v")
	waitScripts(base, 3, "a write to another field wakes the waiter")
	e.do(t, "HDEL", key, "other")
	waitScripts(base, 4, "so does deleting it")

	release(t, h, lease.Released)
	r := await(t, ch, 5*time.Second)
	require.NoError(t, r.err)
	e.requireHeld(t, key, "f", r.lease.OwnerToken())
	release(t, r.lease, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

// 18. ExtendTTL restarts the field's expiry at a new TTL, which later plain Extends keep; a TTL under
// 1ms fails before any I/O and changes nothing.
func testExtendTTL(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s18")
	ls := e.leases(t)
	l, err := ls.TryAcquire(c, key, "f", time.Second)
	require.NoError(t, err)
	ok, err := l.ExtendTTL(c, 20*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 20*time.Second, l.TTL())
	require.Greater(t, l.Remaining(), 19*time.Second)
	require.Greater(t, e.hpttl(t, key, "f"), int64(19000), "the field's expiry restarts at the new TTL")

	ok, err = l.ExtendTTL(c, 0)
	require.False(t, ok)
	require.ErrorIs(t, err, lease.ErrInvalidTTL)
	require.NoError(t, l.Err())
	require.Equal(t, 20*time.Second, l.TTL())

	ok, err = l.ExtendTTL(c, 3*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.LessOrEqual(t, e.hpttl(t, key, "f"), int64(3000), "a shorter TTL shortens the field's expiry")
	require.LessOrEqual(t, l.Remaining(), 3*time.Second)
	ok, err = l.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3*time.Second, l.TTL())
	require.Greater(t, e.hpttl(t, key, "f"), int64(2000), "Extend renews at the last confirmed TTL")
	require.LessOrEqual(t, e.hpttl(t, key, "f"), int64(3000))
	e.requireHeld(t, key, "f", l.OwnerToken())
	release(t, l, lease.Released)
	e.requireAbsent(t, key, "hash key")
}

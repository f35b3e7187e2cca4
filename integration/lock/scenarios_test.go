package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit/fence"
)

// 1. Two contenders: exactly one acquires; successive owners get strictly increasing tokens; renewal
// keeps the token.
func testContention(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, fk := named("s1")
	lockers := []*lock.Locker{e.locker(t), e.locker(t)}
	var last int64
	for round := 0; round < 20; round++ {
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			leases [2]*lock.Lease
			errs   [2]error
		)
		for i := range lockers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				leases[i], errs[i] = lockers[i].TryAcquire(c, ln, 10*time.Second)
			}()
		}
		close(start)
		wg.Wait()
		var won *lock.Lease
		for i := range lockers {
			switch {
			case errs[i] == nil:
				require.Nil(t, won, "round %d: both contenders acquired", round)
				won = leases[i]
			default:
				require.ErrorIs(t, errs[i], lock.ErrNotAcquired, "round %d", round)
				require.Nil(t, leases[i])
			}
		}
		require.NotNil(t, won, "round %d: nobody acquired a free lease", round)
		token := won.FencingToken()
		require.Greater(t, token, last, "round %d: tokens must strictly increase across owners", round)
		last = token
		e.requireLease(t, lk, won.OwnerToken())
		e.requireCounter(t, fk, strconv.FormatInt(token, 10))

		// Renewal keeps the token and does not touch the counter.
		before := won.Deadline()
		ok, err := won.Extend(c)
		require.NoError(t, err)
		require.True(t, ok, "extend by the owner")
		require.Equal(t, token, won.FencingToken())
		require.False(t, won.Deadline().Before(before), "extend must not move the local deadline back")
		e.requireCounter(t, fk, strconv.FormatInt(token, 10))
		held, err := won.Verify(c)
		require.NoError(t, err)
		require.True(t, held)
		require.NoError(t, won.Err())
		release(t, won, lock.Released)
	}
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, strconv.FormatInt(last, 10))
}

// 2. A counter preset to 9007199254740994 issues exactly 9007199254740995 (a Lua number would round it to
// 9007199254740996: odd values above 2^53 are not doubles).
func testTokenAbove2p53(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, fk := named("s2")
	e.do(t, "SET", fk, "9007199254740994")
	l := e.locker(t)
	lease, err := l.TryAcquire(c, ln, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(9007199254740995), lease.FencingToken())
	e.requireCounter(t, fk, "9007199254740995")
	e.requireLease(t, lk, lease.OwnerToken())
	release(t, lease, lock.Released)

	lease, err = l.TryAcquire(c, ln, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(9007199254740996), lease.FencingToken())
	release(t, lease, lock.Released)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, "9007199254740996")
}

// 3. A counter at the int64 maximum fails with an overflow error and writes nothing.
func testCounterOverflow(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, fk := named("s3")
	e.do(t, "SET", fk, "9223372036854775807")
	l := e.locker(t)
	lease, err := l.TryAcquire(c, ln, 10*time.Second)
	require.Nil(t, lease)
	requireCounterError(t, err, lock.CounterOverflow)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, "9223372036854775807")

	// Acquire does not wait on a counter error either.
	lease, err = l.Acquire(c, ln, 10*time.Second)
	require.Nil(t, lease)
	requireCounterError(t, err, lock.CounterOverflow)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, "9223372036854775807")
}

func requireCounterError(t *testing.T, err error, reason lock.CounterReason) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, lock.ErrCounter)
	var ce *lock.CounterError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, reason, ce.Reason, "counter error reason (%v)", err)
}

// 4. An expiring, malformed, negative or overflowing counter (and one of the wrong type) fails; no lease
// is written and the counter is unchanged: DUMP and TTL as before, though the script takes the lease and
// increments the counter before it knows (INCR + DECR, SET + DEL). While another owner holds the lease,
// the answer is ErrNotAcquired, as for a valid counter, and nothing is written.
func testCounterUnusable(t *testing.T, e *env) {
	c := ctx(t)
	l := e.locker(t)
	cases := []struct {
		name   string
		setup  []string // SET arguments after the key; nil: a hash
		reason lock.CounterReason
	}{
		{"expiring", []string{"7", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_negative", []string{"-5", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_malformed", []string{"abc", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_max", []string{"9223372036854775807", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_zero", []string{"0", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_nine", []string{"9", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_ten", []string{"10", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_above_2_53", []string{"9007199254740993", "PX", "600000"}, lock.CounterExpiring},
		{"expiring_max_minus_one", []string{"9223372036854775806", "PX", "600000"}, lock.CounterExpiring},
		{"malformed", []string{"abc"}, lock.CounterMalformed},
		{"empty", []string{""}, lock.CounterMalformed},
		{"negative", []string{"-5"}, lock.CounterNegative},
		{"minus_one", []string{"-1"}, lock.CounterNegative},
		{"minus_nine", []string{"-9"}, lock.CounterNegative},
		{"minus_ten", []string{"-10"}, lock.CounterNegative},
		{"minus_hundred", []string{"-100"}, lock.CounterNegative},
		{"negative_below_2_53", []string{"-9007199254740993"}, lock.CounterNegative},
		{"negative_large", []string{"-5000000000000"}, lock.CounterNegative},
		{"min_int64", []string{"-9223372036854775808"}, lock.CounterNegative},
		{"minus_zero", []string{"-0"}, lock.CounterMalformed},
		{"leading_zero", []string{"007"}, lock.CounterMalformed},
		{"plus_sign", []string{"+5"}, lock.CounterMalformed},
		{"leading_space", []string{" 5"}, lock.CounterMalformed},
		{"trailing_space", []string{"5 "}, lock.CounterMalformed},
		{"float", []string{"1.5"}, lock.CounterMalformed},
		{"above_max", []string{"9223372036854775808"}, lock.CounterMalformed},
		{"too_long", []string{"99999999999999999999"}, lock.CounterMalformed},
		{"max_int64", []string{"9223372036854775807"}, lock.CounterOverflow},
		{"wrongtype", nil, lock.CounterWrongType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, lk, fk := named("s4:" + tc.name)
			if tc.setup != nil {
				e.do(t, append([]string{"SET", fk}, tc.setup...)...)
			} else {
				e.do(t, "HSET", fk, "f", "1")
			}
			pattern := "{" + ln + "}:*"
			before := e.Snapshot(t, pattern)
			require.Len(t, before, 1, "only the counter exists")
			lease, err := l.TryAcquire(c, ln, 10*time.Second)
			require.Nil(t, lease)
			requireCounterError(t, err, tc.reason)
			e.requireAbsent(t, lk, "lease key")
			require.Equal(t, before, e.Snapshot(t, pattern), "counter DUMP and PTTL unchanged")
			if tc.reason == lock.CounterExpiring {
				require.Greater(t, e.PTTL(t, fk), int64(0), "counter keeps its TTL")
			}

			// A held lease is reported as held whatever the counter holds.
			e.do(t, "SET", lk, "another-owner", "PX", "60000")
			before = e.Snapshot(t, pattern)
			lease, err = l.TryAcquire(c, ln, 10*time.Second)
			require.Nil(t, lease)
			require.ErrorIs(t, err, lock.ErrNotAcquired, "held lease, %s counter", tc.name)
			e.requireLease(t, lk, "another-owner")
			require.Equal(t, before, e.Snapshot(t, pattern), "a busy attempt writes nothing")
			e.do(t, "DEL", lk)
		})
	}
}

// 5. Keys in two slots. The two-key form: on Cluster a cross-slot pair fails before any I/O (no command
// on any node) and a hash-tagged pair works; on standalone the pair is accepted,
// unless the Locker has WithStrictSlots, which rejects it as a Cluster does. The one-name form: the
// derived keys share a slot on every target (a name holding braces too), and a name the hash tag
// cannot cover fails before any I/O on every target.
func testCrossSlot(t *testing.T, e *env) {
	c := ctx(t)
	lk, fk := "ck:s5:a:lease", "ck:s5:b:fence"
	require.NotEqual(t, luakit.Slot(lk), luakit.Slot(fk), "test keys must be in different slots")

	// rejected asserts that every try fails with a CrossSlotError for slots before any I/O: no command
	// reaches any node, so nothing is written. (Not DBSIZE: a key an earlier scenario left with a TTL
	// can expire in between.)
	rejected := func(slots []uint16, tries ...func() (*lock.Lease, error)) {
		t.Helper()
		before := e.CommandStats(t)
		for _, try := range tries {
			lease, err := try()
			require.Nil(t, lease)
			require.ErrorIs(t, err, luakit.ErrCrossSlot)
			require.ErrorIs(t, err, luakit.ErrInvalidConfig)
			var cse *luakit.CrossSlotError
			require.ErrorAs(t, err, &cse)
			require.Equal(t, slots, cse.Slots)
		}
		require.Empty(t, e.CommandsSince(t, before), "commands sent for a cross-slot pair")
	}
	twoKeys := func(l *lock.Locker) []func() (*lock.Lease, error) {
		return []func() (*lock.Lease, error){
			func() (*lock.Lease, error) { return l.TryAcquireKeys(c, lk, fk, 10*time.Second) },
			func() (*lock.Lease, error) { return l.AcquireKeys(c, lk, fk, 10*time.Second) },
		}
	}

	if e.IsCluster() {
		rejected([]uint16{luakit.Slot(lk), luakit.Slot(fk)}, twoKeys(e.locker(t))...)
	} else {
		h, err := e.locker(t).TryAcquireKeys(c, lk, fk, 10*time.Second)
		require.NoError(t, err, "a standalone server accepts keys of any slots")
		e.requireLease(t, lk, h.OwnerToken())
		e.requireCounter(t, fk, "1")
		release(t, h, lock.Released)
		e.do(t, "DEL", fk)
		// WithStrictSlots: the pair fails as it would on Cluster.
		rejected([]uint16{luakit.Slot(lk), luakit.Slot(fk)}, twoKeys(e.locker(t, lock.WithStrictSlots(true)))...)
	}
	e.requireAbsent(t, lk, "lease key")
	e.requireAbsent(t, fk, "fence key")

	// The same names under one hash tag work, strict or not.
	lk, fk = "{ck:s5}:a:lease", "{ck:s5}:b:fence"
	for i, l := range []*lock.Locker{e.locker(t), e.locker(t, lock.WithStrictSlots(true))} {
		lease, err := l.TryAcquireKeys(c, lk, fk, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, int64(i+1), lease.FencingToken())
		require.Equal(t, "", lease.Name())
		e.requireLease(t, lk, lease.OwnerToken())
		release(t, lease, lock.Released)
		e.requireAbsent(t, lk, "lease key")
		e.requireCounter(t, fk, strconv.Itoa(i+1))
	}

	// The one-name form: the derived keys share one slot, whatever braces the name holds.
	for _, name := range []string{"ck:s5:named", "ck:s5{x}y", "{ck:s5:z}", "ck:s5}w"} {
		l := e.locker(t)
		lease, err := l.Acquire(c, name, 10*time.Second)
		require.NoError(t, err, "name %q", name)
		wl, wf := lock.Keys(name)
		require.Equal(t, name, lease.Name())
		require.Equal(t, wl, lease.LeaseKey())
		require.Equal(t, wf, lease.FenceKey())
		require.Equal(t, luakit.Slot(wl), luakit.Slot(wf), "name %q", name)
		e.requireLease(t, wl, lease.OwnerToken())
		e.requireCounter(t, wf, "1")
		release(t, lease, lock.Released)
		e.requireAbsent(t, wl, "lease key")
	}
	// A name starting with '}' cannot be tagged ("{}" is no tag): rejected on every target.
	l := e.locker(t)
	bl, bf := lock.Keys("}ck:s5")
	require.NotEqual(t, luakit.Slot(bl), luakit.Slot(bf), "the untaggable name's keys must be in different slots")
	rejected([]uint16{luakit.Slot(bl), luakit.Slot(bf)},
		func() (*lock.Lease, error) { return l.TryAcquire(c, "}ck:s5", 10*time.Second) },
		func() (*lock.Lease, error) { return l.Acquire(c, "}ck:s5", 10*time.Second) },
	)
}

// 6. A key prefix applies to both keys, and binary keys (NUL bytes, invalid UTF-8) round-trip, in the
// two-key form and in the one-name form (whose physical keys are prefix + "{name}:lease" / ":fence").
func testPrefixBinaryKeys(t *testing.T, e *env) {
	c := ctx(t)
	cases := []struct {
		name, prefix, lease, fence string
	}{
		{"binary_prefix", "ck\x00pfx\xff:", "{s6\x00\xfe}:lease", "{s6\x00\xfe}:fence"},
		{"binary_keys", "", "{s6b\xff\xfe\x00}:lease\x00", "{s6b\xff\xfe\x00}:fence\xff"},
		{"tagged_prefix", "{ck:s6c\x00}:", "lease\xff\xfe", "fence\x00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl, pf := tc.prefix+tc.lease, tc.prefix+tc.fence
			var opts []lock.Option
			if tc.prefix != "" {
				opts = append(opts, lock.WithKeyPrefix(tc.prefix))
			}
			l := e.locker(t, opts...)
			lease, err := l.TryAcquireKeys(c, tc.lease, tc.fence, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, int64(1), lease.FencingToken())
			require.Equal(t, tc.lease, lease.LeaseKey())
			require.Equal(t, tc.fence, lease.FenceKey())

			// The physical keys are exactly prefix + key, byte for byte.
			e.requireLease(t, pl, lease.OwnerToken())
			e.requireCounter(t, pf, "1")
			if tc.prefix != "" {
				e.requireAbsent(t, tc.lease, "unprefixed lease key")
				e.requireAbsent(t, tc.fence, "unprefixed fence key")
			}

			// The same lock seen through the same prefix, and through the physical names without prefix.
			_, err = e.locker(t, opts...).TryAcquireKeys(c, tc.lease, tc.fence, 10*time.Second)
			require.ErrorIs(t, err, lock.ErrNotAcquired)
			_, err = e.locker(t).TryAcquireKeys(c, pl, pf, 10*time.Second)
			require.ErrorIs(t, err, lock.ErrNotAcquired)

			ok, err := lease.Extend(c)
			require.NoError(t, err)
			require.True(t, ok)
			held, err := lease.Verify(c)
			require.NoError(t, err)
			require.True(t, held)
			release(t, lease, lock.Released)
			e.requireAbsent(t, pl, "lease key")
			e.requireCounter(t, pf, "1")

			lease, err = l.TryAcquireKeys(c, tc.lease, tc.fence, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, int64(2), lease.FencingToken())
			release(t, lease, lock.Released)
			e.requireAbsent(t, pl, "lease key")
			e.requireCounter(t, pf, "2")
		})
	}

	// The one-name form: binary names under a binary prefix.
	for _, tc := range []struct{ name, prefix, lockName string }{
		{"named_binary_prefix", "ck\x00pfx\xff:", "s6n\x00\xfe"},
		{"named_binary_name", "", "ck:s6m\xff\x00{\xfe}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := e.locker(t, lock.WithKeyPrefix(tc.prefix))
			lease, err := l.TryAcquire(c, tc.lockName, 10*time.Second)
			require.NoError(t, err)
			wl, wf := lock.Keys(tc.lockName)
			require.Equal(t, wl, lease.LeaseKey())
			require.Equal(t, wf, lease.FenceKey())
			e.requireLease(t, tc.prefix+wl, lease.OwnerToken())
			e.requireCounter(t, tc.prefix+wf, "1")
			// The same lock through the two-key form with the derived keys.
			_, err = e.locker(t, lock.WithKeyPrefix(tc.prefix)).TryAcquireKeys(c, wl, wf, 10*time.Second)
			require.ErrorIs(t, err, lock.ErrNotAcquired)
			release(t, lease, lock.Released)
			e.requireAbsent(t, tc.prefix+wl, "lease key")
		})
	}
}

type acquired struct {
	lease *lock.Lease
	err   error
	at    time.Time
}

func acquireAsync(c context.Context, l *lock.Locker, name string, ttl time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		lease, err := l.Acquire(c, name, ttl)
		ch <- acquired{lease, err, time.Now()}
	}()
	return ch
}

func await(t *testing.T, ch <-chan acquired, limit time.Duration) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("Acquire did not return within %v", limit)
		return acquired{}
	}
}

// 7. Release → waiting Acquire hand-offs through a tracker-wired client: latency under a generous bound,
// and the waiter sends (almost) nothing while it waits.
func testHandoffRelease(t *testing.T, e *env) {
	const (
		rounds      = 20
		idleRounds  = 3 // rounds with a 300 ms idle window whose commands are counted
		idleWindow  = 300 * time.Millisecond
		maxIdleCmds = 2 // commands the waiter may send in an idle window (PING excluded)
		// maxRoundCmds bounds the commands per hand-off (13 measured from round 1 on, 17 in round 0): the
		// attempt, the arming read (CLIENT CACHING, MULTI, PTTL x2, EXEC), a second attempt at once, then
		// on the invalidation another arming read and the winning attempt; round 0 also sets up the
		// tracking connection (HELLO, CLIENT).
		maxRoundCmds = 18
		ttl          = 30 * time.Second
	)
	c := ctx(t)
	ln, lk, fk := named("s7")
	holder := e.locker(t)
	counter := newCmdCounter()
	waiter := e.trackedLocker(t, counter)

	var (
		lat  []time.Duration
		last int64
	)
	for round := 0; round < rounds; round++ {
		h, err := holder.TryAcquire(c, ln, ttl)
		require.NoError(t, err, "round %d", round)
		require.Greater(t, h.FencingToken(), last)

		before := counter.snapshot()
		ch := acquireAsync(c, waiter, ln, ttl)
		// The waiter is asleep once it has armed tracking (CLIENT CACHING YES before its attempt on
		// standalone, a cached PTTL read after it on Cluster) and then gone quiet.
		armed := counter.waitQuiet(t, before, armingCommand(e), 20*time.Millisecond, 3*time.Second)
		if round < idleRounds {
			stats0 := e.CommandStats(t)
			time.Sleep(idleWindow)
			sd := e.CommandsSince(t, stats0)
			d, n := delta(armed, counter.snapshot())
			t.Logf("round %d: waiter commands during a %v idle wait: %v", round, idleWindow, d)
			require.LessOrEqual(t, n, int64(maxIdleCmds), "waiter polled while waiting: %v", d)
			// Cross-check on the server: nothing but the target's background commands (INFO, PINGs,
			// handshakes; on Sentinel the replica's and the Sentinels' traffic) ran in the window.
			require.LessOrEqual(t, matrix.Total(sd), int64(maxIdleCmds), "server commandstats during the idle wait: %v", sd)
		}
		e.requireLease(t, lk, h.OwnerToken())

		start := time.Now()
		release(t, h, lock.Released)
		r := await(t, ch, 10*time.Second)
		require.NoError(t, r.err, "round %d", round)
		lat = append(lat, r.at.Sub(start))
		d, n := delta(before, counter.snapshot())
		if round == 0 {
			t.Logf("waiter commands for one hand-off: %v", d)
		}
		require.LessOrEqual(t, n, int64(maxRoundCmds), "round %d: waiter commands for one hand-off: %v", round, d)
		require.Less(t, r.at.Sub(start), time.Second, "round %d: hand-off latency", round)
		require.Greater(t, r.lease.FencingToken(), h.FencingToken())
		last = r.lease.FencingToken()
		e.requireLease(t, lk, r.lease.OwnerToken())
		e.requireCounter(t, fk, strconv.FormatInt(last, 10))
		release(t, r.lease, lock.Released)
	}
	counter.check(t)
	sorted := append([]time.Duration(nil), lat...)
	t.Logf("%s: release→acquire hand-off over %d rounds: p50=%v p99=%v (max %v)", e.Name, rounds,
		quantile(sorted, 0.50), quantile(sorted, 0.99), sorted[len(sorted)-1])
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, strconv.FormatInt(last, 10))
}

// 8. Expiry hand-off: the holder never releases; the waiter acquires within TTL + 500 ms (it retries at
// the PTTL deadline instead of waiting for the server's expiry sweep).
func testHandoffExpiry(t *testing.T, e *env) {
	const ttl = 500 * time.Millisecond
	for _, tracked := range []bool{false, true} {
		name := map[bool]string{false: "pttl_only", true: "tracked"}[tracked]
		t.Run(name, func(t *testing.T) {
			c := ctx(t)
			ln, lk, fk := named("s8:" + name)
			holder := e.locker(t)
			waiter := e.locker(t)
			if tracked {
				waiter = e.trackedLocker(t, nil)
			}
			h, err := holder.TryAcquire(c, ln, ttl)
			require.NoError(t, err)
			granted := time.Now() // the server set the expiry before this
			r := await(t, acquireAsync(c, waiter, ln, 10*time.Second), 10*time.Second)
			require.NoError(t, r.err)
			took := r.at.Sub(granted)
			t.Logf("expiry hand-off after %v (ttl %v)", took, ttl)
			require.Less(t, took, ttl+500*time.Millisecond)
			// The server's lease ends no earlier than the holder's local estimate (measured from before its
			// request), so the next grant cannot be received before that estimate ended.
			require.True(t, r.at.After(h.Deadline()), "new owner granted %v before the old handle's deadline", h.Deadline().Sub(r.at))
			require.Greater(t, r.lease.FencingToken(), h.FencingToken())

			select {
			case <-h.Done():
			case <-time.After(time.Second):
				t.Fatal("the expired holder's handle did not end")
			}
			require.ErrorIs(t, h.Err(), lock.ErrExpired)
			release(t, h, lock.NotOwned)
			e.requireLease(t, lk, r.lease.OwnerToken())
			e.requireCounter(t, fk, strconv.FormatInt(r.lease.FencingToken(), 10))
			release(t, r.lease, lock.Released)
			e.requireAbsent(t, lk, "lease key")
		})
	}
}

// 9. Cancelling a waiting Acquire returns promptly with an error wrapping ctx.Err() and leaves no lease
// (the holder's lease is intact and the counter did not advance).
func testCancelWaiting(t *testing.T, e *env) {
	for _, tracked := range []bool{false, true} {
		name := map[bool]string{false: "pttl_only", true: "tracked"}[tracked]
		t.Run(name, func(t *testing.T) {
			c := ctx(t)
			ln, lk, fk := named("s9:" + name)
			holder := e.locker(t)
			counter := newCmdCounter()
			var waiter *lock.Locker
			if tracked {
				waiter = e.trackedLocker(t, counter)
			} else {
				waiter = newLocker(t, e.NewClient(t, nil, counter.counted()...))
			}
			h, err := holder.TryAcquire(c, ln, 30*time.Second)
			require.NoError(t, err)

			wctx, cancel := context.WithCancel(c)
			defer cancel()
			before := counter.snapshot()
			ch := acquireAsync(wctx, waiter, ln, 30*time.Second)
			need := "EVALSHA" // the attempt; then it sleeps on the PTTL deadline
			if tracked {
				need = armingCommand(e)
			}
			counter.waitQuiet(t, before, need, 20*time.Millisecond, 3*time.Second)
			cancelled := time.Now()
			cancel()
			r := await(t, ch, 5*time.Second)
			took := r.at.Sub(cancelled)
			require.Nil(t, r.lease)
			require.ErrorIs(t, r.err, context.Canceled)
			require.Less(t, took, time.Second, "cancelled Acquire must return promptly")
			t.Logf("cancelled Acquire returned after %v", took)

			e.requireLease(t, lk, h.OwnerToken())
			e.requireCounter(t, fk, strconv.FormatInt(h.FencingToken(), 10))
			release(t, h, lock.Released)
			e.requireAbsent(t, lk, "lease key")
			e.requireCounter(t, fk, strconv.FormatInt(h.FencingToken(), 10))
		})
	}
}

// 10. Release twice → Released then AlreadyReleased; after expiry and takeover → NotOwned, and the new
// owner's lease is intact.
func testReleaseOutcomes(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, fk := named("s10")
	a, b := e.locker(t), e.locker(t)

	la, err := a.TryAcquire(c, ln, 10*time.Second)
	require.NoError(t, err)
	release(t, la, lock.Released)
	release(t, la, lock.AlreadyReleased)
	require.ErrorIs(t, la.Err(), lock.ErrReleased)
	e.requireAbsent(t, lk, "lease key")

	la, err = a.TryAcquire(c, ln, 200*time.Millisecond)
	require.NoError(t, err)
	r := await(t, acquireAsync(c, b, ln, 10*time.Second), 10*time.Second)
	require.NoError(t, r.err)
	lb := r.lease
	require.Greater(t, lb.FencingToken(), la.FencingToken())
	require.True(t, r.at.After(la.Deadline()), "takeover granted before the old handle's deadline")
	<-la.Done()
	require.ErrorIs(t, la.Err(), lock.ErrExpired)

	release(t, la, lock.NotOwned)
	e.requireLease(t, lk, lb.OwnerToken())
	ok, err := la.Extend(c)
	require.NoError(t, err)
	require.False(t, ok, "an expired handle must not extend")
	held, err := la.Verify(c)
	require.NoError(t, err)
	require.False(t, held)
	e.requireLease(t, lk, lb.OwnerToken())
	held, err = lb.Verify(c)
	require.NoError(t, err)
	require.True(t, held)

	release(t, lb, lock.Released)
	release(t, lb, lock.AlreadyReleased)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, strconv.FormatInt(lb.FencingToken(), 10))
}

// 11. KeepAlive holds the lease for 3x its TTL; deleting the lease key ends the handle within one renewal
// interval (ErrLost); pausing the server past the TTL ends it too (ErrExpired).
func testKeepAlive(t *testing.T, e *env) {
	const (
		ttl      = 300 * time.Millisecond
		interval = ttl / 3 // the default renew fraction
		slack    = time.Second
	)
	c := ctx(t)
	ln, lk, fk := named("s11")
	l := e.locker(t)

	t.Run("holds_3x_ttl_then_external_delete", func(t *testing.T) {
		lease, err := l.TryAcquire(c, ln, ttl)
		require.NoError(t, err)
		token := lease.FencingToken()
		require.NoError(t, lease.KeepAlive(c))
		require.ErrorIs(t, lease.KeepAlive(c), lock.ErrKeepAliveRunning)
		time.Sleep(3 * ttl)
		require.NoError(t, lease.Err(), "keep-alive must hold the lease for 3x its TTL")
		held, err := lease.Verify(c)
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, token, lease.FencingToken())
		e.requireLease(t, lk, lease.OwnerToken())
		e.requireCounter(t, fk, strconv.FormatInt(token, 10))

		e.do(t, "DEL", lk)
		deleted := time.Now()
		select {
		case <-lease.Done():
		case <-time.After(interval + slack):
			t.Fatalf("handle did not end within %v of the lease key's deletion", interval+slack)
		}
		t.Logf("handle ended %v after the external delete", time.Since(deleted))
		require.ErrorIs(t, lease.Err(), lock.ErrLost)
		require.ErrorIs(t, context.Cause(lease.Context()), lock.ErrLost)
		release(t, lease, lock.NotOwned)
		e.requireAbsent(t, lk, "lease key")
		e.requireCounter(t, fk, strconv.FormatInt(token, 10))
	})

	if e.Srv == nil {
		return // pausing drives one server process: standalone targets only
	}
	t.Run("server_paused_past_ttl", func(t *testing.T) {
		lease, err := l.TryAcquire(c, ln, ttl)
		require.NoError(t, err)
		require.NoError(t, lease.KeepAlive(c))
		time.Sleep(interval / 2)
		require.NoError(t, e.Srv.Pause())
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				require.NoError(t, e.Srv.Resume())
			}
		}
		defer resume()
		paused := time.Now()
		select {
		case <-lease.Done():
		case <-time.After(ttl + slack):
			t.Fatalf("handle did not end within %v of pausing the server", ttl+slack)
		}
		t.Logf("handle ended %v after the server paused", time.Since(paused))
		require.ErrorIs(t, lease.Err(), lock.ErrExpired)
		require.Zero(t, lease.Remaining())
		ok, err := lease.Extend(c) // no I/O: the local estimate elapsed
		require.NoError(t, err)
		require.False(t, ok)
		time.Sleep(ttl) // make sure the server's lease is past its expiry too
		resume()
		matrix.WaitServing(t, e.Raw)

		release(t, lease, lock.NotOwned)
		e.requireAbsent(t, lk, "lease key")
		e.requireCounter(t, fk, strconv.FormatInt(lease.FencingToken(), 10))
	})
}

// 12. The server restarts (empty data and script cache) between two acquisitions: the second still works
// (EVALSHA answers NOSCRIPT, EVAL runs the script).
func testServerRestart(t *testing.T, e *env) {
	c := ctx(t)
	ln, lk, fk := named("s12")
	client := e.NewClient(t, nil)
	l := newLocker(t, client)
	lease, err := l.TryAcquire(c, ln, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(1), lease.FencingToken())
	release(t, lease, lock.Released)

	require.NoError(t, e.Srv.Restart(c))
	matrix.WaitServing(t, e.Raw)
	e.requireAbsent(t, fk, "fence key after the restart")

	// The client's pooled connections to the old process are dead. rueidis replaces a connection after a
	// command fails on it and does not retry EVALSHA, so a script call on a stale connection fails with
	// a connection error, which the lock must report as ErrUncertain (never as acquired). Such attempts
	// never reached the new server. The first attempt that reaches it must succeed: EVALSHA answers
	// NOSCRIPT and the EVAL fallback runs the script.
	for stale := 0; ; stale++ {
		lease, err = l.TryAcquire(c, ln, 10*time.Second)
		if err == nil {
			t.Logf("acquired after the restart; %d attempt(s) met a connection to the old process", stale)
			break
		}
		require.ErrorIs(t, err, lock.ErrUncertain, "only a stale connection may fail an attempt")
		require.Nil(t, lease)
		require.Less(t, stale, 8, "too many stale connections: %v", err)
		t.Logf("attempt %d after the restart: %v", stale+1, err)
	}
	require.Equal(t, int64(1), lease.FencingToken(), "the restart lost the counter, so tokens start again")
	e.requireLease(t, lk, lease.OwnerToken())
	st := e.CommandStats(t)
	require.GreaterOrEqual(t, st["eval"], int64(1), "EVAL fallback after NOSCRIPT (commandstats %v)", st)

	// Release may meet another stale connection (ErrUncertain); as documented, calling Release again
	// settles it. The failed attempt never reached the new server, so the retry deletes the lease.
	for stale := 0; ; stale++ {
		out, err := lease.Release(c)
		if err == nil {
			require.Equal(t, lock.Released, out)
			break
		}
		require.ErrorIs(t, err, lock.ErrUncertain, "only a stale connection may fail a release")
		require.Less(t, stale, 8, "too many stale connections: %v", err)
		t.Logf("release attempt %d after the restart: %v", stale+1, err)
	}
	release(t, lease, lock.AlreadyReleased)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, "1")
}

// 13. 50 goroutines x 200 TryAcquire/Release on one key with a Fence: no overlapping holders, no
// rejected write from a current holder, and a stale write is rejected.
func testFencedStress(t *testing.T, e *env) {
	const (
		workers  = 50
		attempts = 200
		clients  = 5
		ttl      = 10 * time.Second // long enough that no lease can expire while its holder works
	)
	c := ctx(t)
	ln, lk, fk := named("s13")
	lockers := make([]*lock.Locker, clients)
	for i := range lockers {
		lockers[i] = e.locker(t)
	}
	var (
		fence    fence.Fence[int]
		holders  atomic.Int32
		overlaps atomic.Int64
		rejected atomic.Int64
		failures atomic.Int64
		mu       sync.Mutex
		tokens   []int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lockers[w%clients]
			for i := 0; i < attempts; i++ {
				lease, err := l.TryAcquire(c, ln, ttl)
				if errors.Is(err, lock.ErrNotAcquired) {
					continue
				}
				if err != nil {
					failures.Add(1)
					t.Errorf("worker %d: TryAcquire: %v", w, err)
					return
				}
				if holders.Add(1) > 1 {
					overlaps.Add(1)
				}
				if !fence.TryWrite(lease.FencingToken(), w) {
					rejected.Add(1)
				}
				mu.Lock()
				tokens = append(tokens, lease.FencingToken())
				mu.Unlock()
				holders.Add(-1) // before Release: the next holder may start as soon as it returns
				out, err := lease.Release(c)
				if err != nil || out != lock.Released {
					failures.Add(1)
					t.Errorf("worker %d: Release: %v %v", w, out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	n := int64(len(tokens))
	accepted, rej := fence.Counts()
	t.Logf("%d workers x %d attempts: %d acquisitions in %v", workers, attempts, n, took)
	require.Zero(t, failures.Load())
	require.Zero(t, overlaps.Load(), "overlapping holders")
	require.Zero(t, rejected.Load(), "fence rejected a current holder's write")
	require.Zero(t, rej)
	require.Equal(t, n, accepted)
	require.Positive(t, n)
	// Every issued token was used once, in order, with no gaps (no acquisition was uncertain).
	seen := make(map[int64]bool, n)
	for _, tok := range tokens {
		require.False(t, seen[tok], "token %d issued twice", tok)
		require.True(t, tok >= 1 && tok <= n, "token %d outside 1..%d", tok, n)
		seen[tok] = true
	}
	_, highest := fence.Value()
	require.Equal(t, n, highest)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, strconv.FormatInt(n, 10))

	// A deliberately stale write: the token of a released lease, after a newer holder wrote.
	old, err := lockers[0].TryAcquire(c, ln, ttl)
	require.NoError(t, err)
	require.True(t, fence.TryWrite(old.FencingToken(), -1))
	release(t, old, lock.Released)
	cur, err := lockers[1].TryAcquire(c, ln, ttl)
	require.NoError(t, err)
	require.True(t, fence.TryWrite(cur.FencingToken(), -2))
	require.False(t, fence.TryWrite(old.FencingToken(), -1), "stale write accepted")
	require.True(t, fence.TryWrite(cur.FencingToken(), -3), "the current holder may write again")
	v, highest := fence.Value()
	require.Equal(t, -3, v)
	require.Equal(t, cur.FencingToken(), highest)
	_, rej = fence.Counts()
	require.EqualValues(t, 1, rej)
	release(t, cur, lock.Released)
	e.requireAbsent(t, lk, "lease key")
	e.requireCounter(t, fk, strconv.FormatInt(n+2, 10))
}

// armingCommand is the command a tracked waiter sends to arm tracking: CLIENT (CACHING YES, before its
// first attempt) on standalone and Sentinel, PTTL (the cached read after a busy attempt) on Cluster.
func armingCommand(e *env) string {
	if e.Cluster != nil {
		return "PTTL"
	}
	return "CLIENT"
}

// 21. The server side of one TryAcquire+Release cycle on an existing counter, from INFO commandstats
// summed over every server process: the two EVALSHAs and the commands they run (acquire: SET NX PX,
// INCR, PTTL of the counter; release: GET, DEL), 7 in all, as with a new counter, with the scripts; with
// the default options on a server that has DELIFEQ or DELEX IFEQ, release is that one command, 5 in
// all; and of a TryAcquire on a held lock, 3. The target's background commands (matrix.Env.BackgroundCommands: INFO, PINGs,
// handshakes, a Sentinel's hello PUBLISH...) are left out.
func testCycleCommands(t *testing.T, e *env) {
	c := ctx(t)
	_, del := serverFast(t, e)
	scripts := map[string]int64{"evalsha": 2, "set": 1, "incr": 1, "pttl": 1, "get": 1, "del": 1}
	for _, p := range []struct {
		name string
		on   bool
		want map[string]int64
	}{
		{"scripts", false, scripts},
		// Where the server has DELIFEQ / DELEX IFEQ, Release is that one command: no script, no GET.
		{"default", true, map[string]int64{"evalsha": 1, "set": 1, "incr": 1, "pttl": 1, strings.ToLower(del): 1}},
	} {
		if p.on && del == "" {
			p.want = scripts
		}
		l := e.locker(t, lock.WithConditionalCommands(p.on))
		ln, _, fk := named("s21:" + p.name)
		cycle := func() {
			t.Helper()
			lease, err := l.TryAcquire(c, ln, 10*time.Second)
			require.NoError(t, err)
			out, err := lease.Release(c)
			require.NoError(t, err)
			require.Equal(t, lock.Released, out)
		}
		cycle() // loads the scripts (EVAL after NOSCRIPT), probes the server, and creates the counter
		e.requireCounter(t, fk, "1")
		before := e.CommandStats(t)
		cycle()
		got := e.CommandsSince(t, before)
		e.requireCounter(t, fk, "2")
		require.Equal(t, p.want, got, "%s: commands of one cycle on an existing counter", p.name)

		// A held lock: the script's SET NX fails and PTTL reads the holder's remaining time, nothing more.
		held, err := l.TryAcquire(c, ln, 10*time.Second)
		require.NoError(t, err)
		before = e.CommandStats(t)
		lease, err := l.TryAcquire(c, ln, 10*time.Second)
		require.Nil(t, lease)
		require.ErrorIs(t, err, lock.ErrNotAcquired)
		got = e.CommandsSince(t, before)
		require.Equal(t, map[string]int64{"evalsha": 1, "set": 1, "pttl": 1}, got, "commands of an attempt on a held lock")
		_, err = held.Release(c)
		require.NoError(t, err)
	}
}

package latch_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/latch"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// longRecheck is a recheck interval no scenario waits for: a Wait that returns well before it was
// woken by Pub/Sub, not by the periodic re-read.
const longRecheck = 30 * time.Second

// wakeBound is the generous bound for a Pub/Sub wake-up (timing never decides pass/fail otherwise).
const wakeBound = 5 * time.Second

type scenario = matrix.Scenario[*env]

var scenarios = []scenario{
	{Name: "01_method_table", Run: testMethodTable},
	{Name: "02_ten_waiters_wake", Run: testTenWaiters},
	{Name: "03_lost_message_reread", Run: testLostMessage},
	{Name: "04_subscriber_disconnected", Run: testSubscriberDisconnected, StandaloneOnly: true},
	{Name: "05_reset_mid_wait", Run: testResetMidWait},
	{Name: "06_late_signal_after_reset", Run: testLateSignal},
	{Name: "07_expiry", Run: testExpiry},
	{Name: "08_abort", Run: testAbort},
	{Name: "09_prefix_binary_keys", Run: testPrefixBinary},
	{Name: "10_bad_input", Run: testBadInput},
	{Name: "11_delete_and_cancel", Run: testDeleteAndCancel},
	{Name: "12_foreign_data", Run: testForeignData},
	{Name: "13_no_channel_permission", Run: testNoChannelPermission},
	{Name: "90_least_privilege_acl", Run: testLeastPrivilege},
}

// TestLatch runs every scenario on every target. Targets run in parallel (at most matrix.MaxParallelTargets
// at once), each with its own server or cluster; the scenarios of one target run in order on it.
func TestLatch(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, nil)
	})
}

// The method table: Create twice, Join absent, Reset, CountDown on a replaced and on a completed
// generation, Count, an already complete latch, counts beyond 2^53.
func testMethodTable(t *testing.T, e *env) {
	c := ctx(t)
	ls := e.latches(t)
	key := "latch:table"

	_, err := ls.Join(c, key)
	require.ErrorIs(t, err, latch.ErrNotFound, "Join of an absent latch")

	l1, err := ls.Create(c, key, 2)
	require.NoError(t, err)
	require.Len(t, l1.Generation(), 32)
	require.EqualValues(t, 2, l1.Initial())
	require.True(t, l1.ExpiresAt().IsZero())
	e.requireLatch(t, key, l1.Generation(), "2")
	require.EqualValues(t, -1, e.PTTL(t, key), "a latch without WithExpiry never expires")

	_, err = ls.Create(c, key, 5)
	require.ErrorIs(t, err, latch.ErrExists, "Create over an existing latch")
	e.requireLatch(t, key, l1.Generation(), "2")

	j, err := ls.Join(c, key)
	require.NoError(t, err)
	require.Equal(t, l1.Generation(), j.Generation(), "Join joins the current generation")
	require.EqualValues(t, 2, j.Initial())

	n, err := j.CountDown(c)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	n, err = l1.Count(c)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	l2, err := ls.Reset(c, key, 3)
	require.NoError(t, err)
	require.NotEqual(t, l1.Generation(), l2.Generation())
	e.requireLatch(t, key, l2.Generation(), "3")

	_, err = l1.CountDown(c)
	require.ErrorIs(t, err, latch.ErrReplaced, "CountDown against a replaced generation")
	_, err = l1.Count(c)
	require.ErrorIs(t, err, latch.ErrReplaced)
	e.requireLatch(t, key, l2.Generation(), "3")

	for want := int64(2); want >= 0; want-- {
		n, err = l2.CountDown(c)
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	_, err = l2.CountDown(c)
	require.ErrorIs(t, err, latch.ErrCompleted, "CountDown on a completed generation")
	e.requireLatch(t, key, l2.Generation(), "0")
	require.NoError(t, l2.Wait(c), "a completed generation's Wait returns nil at once")

	// Count 0 creates an already complete latch.
	z, err := ls.Create(c, "latch:zero", 0)
	require.NoError(t, err)
	require.NoError(t, z.Wait(c))
	_, err = z.CountDown(c)
	require.ErrorIs(t, err, latch.ErrCompleted)
	e.requireLatch(t, "latch:zero", z.Generation(), "0")

	// Counts beyond 2^53 stay exact across the Lua boundary.
	big, err := ls.Create(c, "latch:big", 9007199254740995)
	require.NoError(t, err)
	n, err = big.CountDown(c)
	require.NoError(t, err)
	require.EqualValues(t, int64(9007199254740994), n)
	e.requireLatch(t, "latch:big", big.Generation(), "9007199254740994")
}

// Ten waiters (over two clients) all wake at zero, by Pub/Sub (the recheck interval is far away).
func testTenWaiters(t *testing.T, e *env) {
	c := ctx(t)
	key := "latch:ten"
	a := e.latches(t, latch.WithRecheckInterval(longRecheck))
	b := e.latches(t, latch.WithRecheckInterval(longRecheck))
	l, err := a.Create(c, key, 3)
	require.NoError(t, err)

	var waits []<-chan waitResult
	for i := range 10 {
		ls := a
		if i%2 == 1 {
			ls = b
		}
		j, err := ls.Join(c, key)
		require.NoError(t, err)
		waits = append(waits, goWait(c, j))
	}
	require.Eventually(t, func() bool { return e.shardSubscribers(t, key) == 2 }, wakeBound, 10*time.Millisecond,
		"one shared subscription per client")
	for _, w := range waits {
		requirePending(t, w, 0)
	}
	for range 3 {
		_, err := l.CountDown(c)
		require.NoError(t, err)
	}
	for i, w := range waits {
		r := result(t, w, wakeBound)
		require.NoError(t, r.err, "waiter %d", i)
	}
	e.requireLatch(t, key, l.Generation(), "0")
	e.requireNoSubscribers(t, key)
}

// A completion whose message never arrives (the count set to zero behind the package's back, without a
// publish) still ends the wait, by the periodic re-read.
func testLostMessage(t *testing.T, e *env) {
	c := ctx(t)
	key := "latch:lost"
	const recheck = 200 * time.Millisecond
	ls := e.latches(t, latch.WithRecheckInterval(recheck))
	l, err := ls.Create(c, key, 4)
	require.NoError(t, err)
	w := goWait(c, l)
	require.Eventually(t, func() bool { return e.shardSubscribers(t, key) == 1 }, wakeBound, 10*time.Millisecond)
	requirePending(t, w, 2*recheck)

	start := time.Now()
	require.NoError(t, e.Raw.Do(c, e.Raw.B().Hset().Key(key).FieldValue().FieldValue("count", "0").Build()).Error())
	r := result(t, w, recheck+wakeBound)
	require.NoError(t, r.err)
	t.Logf("completed %v after the silent write (recheck %v)", time.Since(start), recheck)
	e.requireLatch(t, key, l.Generation(), "0")
	e.requireNoSubscribers(t, key)
}

// The waiter's connection breaks or stops delivering replies while the count reaches zero: the
// published message is lost, and the waiter completes by re-reading once it can. Standalone only
// (the fault proxy fronts one server).
func testSubscriberDisconnected(t *testing.T, e *env) {
	c := ctx(t)
	const recheck = 300 * time.Millisecond
	direct := e.latches(t)

	t.Run("cut", func(t *testing.T) {
		key := "latch:cut"
		p := testkit.NewProxy(t, e.Srv.Addr)
		ls := newLatches(t, p.Client(t), latch.WithRecheckInterval(recheck))
		l, err := direct.Create(c, key, 1)
		require.NoError(t, err)
		j, err := ls.Join(c, key)
		require.NoError(t, err)
		w := goWait(c, j)
		require.Eventually(t, func() bool { return e.shardSubscribers(t, key) == 1 }, wakeBound, 10*time.Millisecond)

		require.NoError(t, p.CutConnections())
		n, err := l.CountDown(c)
		require.NoError(t, err)
		require.EqualValues(t, 0, n)
		r := result(t, w, recheck+wakeBound)
		require.NoError(t, r.err)
		e.requireLatch(t, key, l.Generation(), "0")
		e.requireNoSubscribers(t, key)
	})

	t.Run("dropped_replies", func(t *testing.T) {
		key := "latch:dropped"
		p := testkit.NewProxy(t, e.Srv.Addr)
		ls := newLatches(t, p.Client(t), latch.WithRecheckInterval(recheck))
		l, err := direct.Create(c, key, 1)
		require.NoError(t, err)
		j, err := ls.Join(c, key)
		require.NoError(t, err)
		w := goWait(c, j)
		require.Eventually(t, func() bool { return e.shardSubscribers(t, key) == 1 }, wakeBound, 10*time.Millisecond)

		require.NoError(t, p.DropReplies())
		n, err := l.CountDown(c)
		require.NoError(t, err)
		require.EqualValues(t, 0, n)
		// The message and every re-read's reply are swallowed: the waiter cannot know yet.
		requirePending(t, w, 3*recheck)
		start := time.Now()
		require.NoError(t, p.Reset())
		r := result(t, w, recheck+wakeBound)
		require.NoError(t, r.err)
		t.Logf("completed %v after replies flowed again (recheck %v)", time.Since(start), recheck)
		e.requireLatch(t, key, l.Generation(), "0")
		e.requireNoSubscribers(t, key)
	})
}

// Reset while waiters wait: they return ErrReplaced promptly (woken by Pub/Sub); the new generation's
// waiters keep waiting and complete on the new count.
func testResetMidWait(t *testing.T, e *env) {
	c := ctx(t)
	key := "latch:reset"
	ls := e.latches(t, latch.WithRecheckInterval(longRecheck))
	old, err := ls.Create(c, key, 2)
	require.NoError(t, err)
	_, err = old.CountDown(c)
	require.NoError(t, err)
	w1, w2 := goWait(c, old), goWait(c, old)
	require.Eventually(t, func() bool { return e.shardSubscribers(t, key) == 1 }, wakeBound, 10*time.Millisecond)

	nw, err := ls.Reset(c, key, 2)
	require.NoError(t, err)
	for _, w := range []<-chan waitResult{w1, w2} {
		r := result(t, w, wakeBound)
		require.ErrorIs(t, r.err, latch.ErrReplaced, "an old waiter returns ErrReplaced after Reset")
	}
	e.requireLatch(t, key, nw.Generation(), "2")
	require.NotContains(t, e.hash(t, key), "prevdone", "the old generation had not completed")

	w3 := goWait(c, nw)
	requirePending(t, w3, 100*time.Millisecond)
	for range 2 {
		_, err := nw.CountDown(c)
		require.NoError(t, err)
	}
	r := result(t, w3, wakeBound)
	require.NoError(t, r.err)

	// A generation that completed before the Reset still reports completion to its late waiters.
	again, err := ls.Reset(c, key, 1)
	require.NoError(t, err)
	require.Equal(t, nw.Generation(), e.hash(t, key)["prevdone"])
	require.NoError(t, nw.Wait(c), "the replaced generation had completed")
	e.requireLatch(t, key, again.Generation(), "1")
	e.requireNoSubscribers(t, key)
}

// Late signals, aborts and deletes from an older generation never touch a reset latch, even a latch
// deleted and created again.
func testLateSignal(t *testing.T, e *env) {
	c := ctx(t)
	key := "latch:late"
	ls := e.latches(t)
	old, err := ls.Create(c, key, 3)
	require.NoError(t, err)
	nw, err := ls.Reset(c, key, 3)
	require.NoError(t, err)
	for range 5 {
		_, err := old.CountDown(c)
		require.ErrorIs(t, err, latch.ErrReplaced)
	}
	require.ErrorIs(t, old.Abort(c, "late"), latch.ErrReplaced)
	ok, err := old.Delete(c)
	require.NoError(t, err)
	require.False(t, ok)
	e.requireLatch(t, key, nw.Generation(), "3")
	require.NotContains(t, e.hash(t, key), "aborted")

	// Deleted, then created again: the old handle's generation is gone for good.
	ok, err = nw.Delete(c)
	require.NoError(t, err)
	require.True(t, ok)
	e.requireAbsent(t, key, "deleted latch")
	_, err = nw.CountDown(c)
	require.ErrorIs(t, err, latch.ErrReplaced, "CountDown after deletion")
	fresh, err := ls.Create(c, key, 3)
	require.NoError(t, err)
	_, err = nw.CountDown(c)
	require.ErrorIs(t, err, latch.ErrReplaced)
	e.requireLatch(t, key, fresh.Generation(), "3")
}

// An expiring latch wakes its waiters with ErrLatchExpired (not ErrReplaced) when the key expires.
func testExpiry(t *testing.T, e *env) {
	c := ctx(t)
	key := "latch:expiry"
	ls := e.latches(t, latch.WithRecheckInterval(longRecheck))
	const ttl = 600 * time.Millisecond
	l, err := ls.Create(c, key, 5, latch.WithExpiry(ttl))
	require.NoError(t, err)
	require.False(t, l.ExpiresAt().IsZero())
	p := e.PTTL(t, key)
	require.Greater(t, p, int64(0))
	require.LessOrEqual(t, p, ttl.Milliseconds())
	j, err := ls.Join(c, key)
	require.NoError(t, err)
	require.Equal(t, l.ExpiresAt(), j.ExpiresAt(), "Join learns the generation's deadline")

	w := goWait(c, j)
	_, err = l.CountDown(c)
	require.NoError(t, err)
	r := result(t, w, ttl+wakeBound)
	require.ErrorIs(t, r.err, latch.ErrLatchExpired)
	e.requireAbsent(t, key, "expired latch")

	_, err = l.CountDown(c)
	require.ErrorIs(t, err, latch.ErrLatchExpired)
	_, err = l.Count(c)
	require.ErrorIs(t, err, latch.ErrLatchExpired)
	require.ErrorIs(t, l.Abort(c, "x"), latch.ErrLatchExpired)
	_, err = ls.Join(c, key)
	require.ErrorIs(t, err, latch.ErrNotFound)
	e.requireAbsent(t, key, "expired latch")

	// A Reset without WithExpiry makes a persistent latch even over an expiring one.
	_, err = ls.Create(c, key, 1, latch.WithExpiry(time.Minute))
	require.NoError(t, err)
	r2, err := ls.Reset(c, key, 1)
	require.NoError(t, err)
	require.True(t, r2.ExpiresAt().IsZero())
	require.EqualValues(t, -1, e.PTTL(t, key))
	e.requireNoSubscribers(t, key)
}

// Abort fails every waiter with the reason, stored so that later calls see it too.
func testAbort(t *testing.T, e *env) {
	c := ctx(t)
	key := "latch:abort"
	ls := e.latches(t, latch.WithRecheckInterval(longRecheck))
	l, err := ls.Create(c, key, 3)
	require.NoError(t, err)
	_, err = l.CountDown(c)
	require.NoError(t, err)
	var waits []<-chan waitResult
	for range 3 {
		waits = append(waits, goWait(c, l))
	}
	require.Eventually(t, func() bool { return e.shardSubscribers(t, key) == 1 }, wakeBound, 10*time.Millisecond)
	require.NoError(t, l.Abort(c, "disk full"))
	for _, w := range waits {
		r := result(t, w, wakeBound)
		var ae *latch.AbortedError
		require.ErrorAs(t, r.err, &ae)
		require.Equal(t, "disk full", ae.Reason)
		require.ErrorIs(t, r.err, latch.ErrAborted)
	}
	h := e.hash(t, key)
	require.Equal(t, "disk full", h["aborted"])
	require.Equal(t, "2", h["count"], "Abort leaves the count")

	var ae *latch.AbortedError
	_, err = ls.Join(c, key)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "disk full", ae.Reason)
	_, err = l.CountDown(c)
	require.ErrorAs(t, err, &ae)
	_, err = l.Count(c)
	require.ErrorAs(t, err, &ae)
	require.ErrorAs(t, l.Wait(c), &ae)
	err = l.Abort(c, "second")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "disk full", ae.Reason, "the first reason stays")
	require.Equal(t, "2", e.hash(t, key)["count"])

	// Abort after completion is refused.
	z, err := ls.Create(c, "latch:abort-done", 0)
	require.NoError(t, err)
	require.ErrorIs(t, z.Abort(c, "late"), latch.ErrCompleted)
	require.NotContains(t, e.hash(t, "latch:abort-done"), "aborted")
	e.requireNoSubscribers(t, key)
}

// A binary prefix and binary keys without hash tags (different Cluster slots) work end to end.
func testPrefixBinary(t *testing.T, e *env) {
	c := ctx(t)
	prefix := "\x00pfx\xff:"
	ls := e.latches(t, latch.WithKeyPrefix(prefix), latch.WithRecheckInterval(longRecheck))
	keys := []string{"bin\x00\xffkey", "other\r\nkey", "third key é"}
	slots := map[uint16]bool{}
	for _, k := range keys {
		slots[luakit.Slot(prefix+k)] = true
	}
	require.Greater(t, len(slots), 1, "the keys must span several slots")
	for i, k := range keys {
		l, err := ls.Create(c, k, 2)
		require.NoError(t, err)
		require.Equal(t, k, l.Key())
		w := goWait(c, l)
		for range 2 {
			_, err := l.CountDown(c)
			require.NoError(t, err)
		}
		r := result(t, w, wakeBound)
		require.NoError(t, r.err, "key %d", i)
		e.requireLatch(t, prefix+k, l.Generation(), "0")
		e.requireAbsent(t, k, "unprefixed key")
		e.requireNoSubscribers(t, prefix+k)
	}
}

// Invalid input fails before any I/O and writes nothing.
func testBadInput(t *testing.T, e *env) {
	c := ctx(t)
	ls := e.latches(t)
	invalid := func(err, want error) {
		t.Helper()
		require.ErrorIs(t, err, want)
		require.ErrorIs(t, err, luakit.ErrInvalidConfig, "every bad argument matches luakit.ErrInvalidConfig")
		require.True(t, strings.HasPrefix(err.Error(), "latch: "), "error %q lacks the module prefix", err)
	}
	_, err := ls.Create(c, "latch:bad", -1)
	invalid(err, latch.ErrInvalidCount)
	_, err = ls.Reset(c, "latch:bad", -5)
	invalid(err, latch.ErrInvalidCount)
	_, err = ls.Create(c, "", 1)
	invalid(err, luakit.ErrEmptyKey)
	_, err = ls.Join(c, "")
	invalid(err, luakit.ErrEmptyKey)
	_, err = ls.Create(c, "latch:bad", 1, latch.WithExpiry(0))
	invalid(err, latch.ErrInvalidExpiry)
	_, err = ls.Reset(c, "latch:bad", 1, latch.WithExpiry(500*time.Microsecond))
	invalid(err, latch.ErrInvalidExpiry)
	e.requireAbsent(t, "latch:bad", "latch after rejected input")
	_, err = latch.New(nil)
	require.ErrorIs(t, err, latch.ErrNilClient)
	require.ErrorIs(t, err, luakit.ErrNilClient)
	_, err = latch.New(e.Raw, latch.WithRecheckInterval(0))
	invalid(err, luakit.ErrInvalidConfig)
}

// Delete wakes waiters with ErrReplaced; a raw DEL is noticed at the next re-read; a cancelled Wait changes
// nothing.
func testDeleteAndCancel(t *testing.T, e *env) {
	c := ctx(t)
	ls := e.latches(t, latch.WithRecheckInterval(longRecheck))
	l, err := ls.Create(c, "latch:del", 2)
	require.NoError(t, err)
	w := goWait(c, l)
	require.Eventually(t, func() bool { return e.shardSubscribers(t, "latch:del") == 1 }, wakeBound, 10*time.Millisecond)
	ok, err := l.Delete(c)
	require.NoError(t, err)
	require.True(t, ok)
	r := result(t, w, wakeBound)
	require.ErrorIs(t, r.err, latch.ErrReplaced, "a deleted latch's waiter returns ErrReplaced")
	e.requireAbsent(t, "latch:del", "deleted latch")

	const recheck = 200 * time.Millisecond
	short := e.latches(t, latch.WithRecheckInterval(recheck))
	l2, err := short.Create(c, "latch:rawdel", 2)
	require.NoError(t, err)
	w2 := goWait(c, l2)
	require.Eventually(t, func() bool { return e.shardSubscribers(t, "latch:rawdel") == 1 }, wakeBound, 10*time.Millisecond)
	require.NoError(t, e.Raw.Do(c, e.Raw.B().Del().Key("latch:rawdel").Build()).Error())
	r = result(t, w2, recheck+wakeBound)
	require.ErrorIs(t, r.err, latch.ErrReplaced)

	l3, err := ls.Create(c, "latch:cancel", 2)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(c, 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, l3.Wait(cctx), context.DeadlineExceeded)
	e.requireLatch(t, "latch:cancel", l3.Generation(), "2")
	for _, k := range []string{"latch:del", "latch:rawdel", "latch:cancel"} {
		e.requireNoSubscribers(t, k)
	}
}

// A key holding data no latch script wrote (another Redis type, or a hash whose latch fields do not
// decode) is reported as luakit.ErrForeignData by every call, and is never changed or replaced.
func testForeignData(t *testing.T, e *env) {
	c := ctx(t)
	ls := e.latches(t, latch.WithRecheckInterval(longRecheck))
	foreign := func(t *testing.T, err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, luakit.ErrForeignData, what)
		require.True(t, strings.HasPrefix(err.Error(), "latch: "), "%s: error %q lacks the module prefix", what, err)
	}
	// every call on a key whose latch l was overwritten behind the package's back.
	every := func(t *testing.T, key string, l *latch.Latch) {
		t.Helper()
		_, err := ls.Create(c, key, 1)
		foreign(t, err, "Create")
		_, err = ls.Reset(c, key, 1)
		foreign(t, err, "Reset")
		_, err = ls.Join(c, key)
		foreign(t, err, "Join")
		_, err = l.CountDown(c)
		foreign(t, err, "CountDown")
		_, err = l.Count(c)
		foreign(t, err, "Count")
		foreign(t, l.Abort(c, "x"), "Abort")
		wctx, cancel := context.WithTimeout(c, wakeBound)
		defer cancel()
		foreign(t, l.Wait(wctx), "Wait")
		_, err = l.Delete(c)
		foreign(t, err, "Delete")
	}

	t.Run("string", func(t *testing.T) {
		key := "latch:foreign:string"
		l, err := ls.Create(c, key, 2)
		require.NoError(t, err)
		require.NoError(t, e.Raw.Do(c, e.Raw.B().Set().Key(key).Value("x").Build()).Error())
		every(t, key, l)
		v, err := e.Raw.Do(c, e.Raw.B().Get().Key(key).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, "x", v, "the foreign value is unchanged")
	})

	// A hash with the latch's generation but a count no script writes: the count is never changed
	// (HINCRBY would fail after nothing, or count a negative value down further).
	for i, count := range []string{"abc", "-3", "01", "99999999999999999999"} {
		t.Run("count_"+strconv.Itoa(i), func(t *testing.T) {
			key := "latch:foreign:count:" + strconv.Itoa(i)
			l, err := ls.Create(c, key, 2)
			require.NoError(t, err)
			require.NoError(t, e.Raw.Do(c, e.Raw.B().Hset().Key(key).FieldValue().FieldValue("count", count).Build()).Error())
			every(t, key, l)
			e.requireLatch(t, key, l.Generation(), count)
			require.NotContains(t, e.hash(t, key), "aborted")
		})
	}

	// A hash without the latch's fields.
	t.Run("hash", func(t *testing.T) {
		key := "latch:foreign:hash"
		l, err := ls.Create(c, key, 2)
		require.NoError(t, err)
		require.NoError(t, e.Raw.Do(c, e.Raw.B().Hdel().Key(key).Field("count").Build()).Error())
		every(t, key, l)
		require.Equal(t, l.Generation(), e.hash(t, key)["gen"])
	})
}

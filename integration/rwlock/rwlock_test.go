package rwlock_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/rwlock"
)

// scenario is one behaviour of the rwlock module, checked on every target. Each asserts the server
// state it leaves through the env's raw client. Generic handle behaviour (the ownership contract) is
// tested by the conformance suite in ../ownership.
type scenario = matrix.Scenario[*env]

var scenarios = []scenario{
	{Name: "01_modes", Run: testModes},
	{Name: "02_contention_Concurrent", Run: testContention},
	{Name: "03_expiry_handoff", Run: testExpiryHandoff},
	{Name: "04_per_reader_expiry", Run: testPerReaderExpiry},
	{Name: "05_owner_isolation", Run: testOwnerIsolation},
	{Name: "06_renewal_of_gone_entry_lost", Run: testFailedRenewal},
	{Name: "07_verify", Run: testVerify},
	{Name: "08_prefix_binary_keys", Run: testPrefixBinary},
	{Name: "09_bad_input", Run: testBadInput},
	{Name: "10_release_twice", Run: testReleaseTwice},
	{Name: "11_noscript_recovery", Run: testNoScript},
	{Name: "12_close_best_effort", Run: testClose},
	{Name: "13_uncertain_acquire", Run: testUncertainAcquire},
	{Name: "14_wait_writer_woken_by_release", Run: testWaitWriterRelease},
	{Name: "15_wait_writer_woken_by_expiry", Run: testWaitWriterExpiry},
	{Name: "16_wait_reader_woken_by_writer_release", Run: testWaitReaderRelease},
	{Name: "17_wait_ctx_ends", Run: testWaitCtx},
	{Name: "18_wait_no_polling", Run: testWaitNoPolling},
	{Name: "19_keepalive_renews_own_entry", Run: testKeepAlive},
	{Name: "90_least_privilege_acl", Run: testLeastPrivilege},
}

// TestRWLock runs every scenario on every target. Targets run in parallel (at most matrix.MaxParallelTargets at
// once), each with its own server or cluster; the scenarios of one target run in order on it.
func TestRWLock(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, nil)
	})
}

// 1. Mode compatibility: readers share, a writer excludes everyone; nothing is written on refusal.
func testModes(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:modes"
	l := e.locker(t)
	r1, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, rwlock.Read, r1.Mode())
	r2, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	w, err := l.TryAcquireWrite(c, key, 30*time.Second)
	require.ErrorIs(t, err, rwlock.ErrNotAcquired)
	require.Nil(t, w)
	e.requireEntries(t, key, r1, r2)

	release(t, r1, rwlock.Released)
	_, err = l.TryAcquireWrite(c, key, 30*time.Second)
	require.ErrorIs(t, err, rwlock.ErrNotAcquired, "one reader still holds it")
	release(t, r2, rwlock.Released)
	e.requireAbsent(t, key)

	w, err = l.TryAcquireWrite(c, key, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, rwlock.Write, w.Mode())
	_, err = l.TryAcquireRead(c, key, 30*time.Second)
	require.ErrorIs(t, err, rwlock.ErrNotAcquired)
	_, err = l.TryAcquireWrite(c, key, 30*time.Second)
	require.ErrorIs(t, err, rwlock.ErrNotAcquired)
	e.requireEntries(t, key, w)
	ok, err := w.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// 2. 16 goroutines randomly take read or write leases (long TTL) on one key. The invariant is checked
// at every instant with atomic counters: either at most one writer and no readers, or no writers.
// Every holder counts itself in after its grant and out before its release, so overlapping counts mean
// overlapping server-side leases.
func testContention(t *testing.T, e *env) {
	const (
		workers = 16
		rounds  = 40
	)
	key := "ck:rw:contention"
	l := e.locker(t)
	var (
		readers, writers   atomic.Int64
		reads, writes      atomic.Int64
		maxReaders, denied atomic.Int64
		violations         atomic.Int64
		wantWrite          atomic.Int64 // writers currently retrying
	)
	check := func() {
		w, r := writers.Load(), readers.Load()
		if w > 1 || (w == 1 && r > 0) {
			violations.Add(1)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for range rounds {
				write := rng.IntN(3) == 0
				var (
					lease *rwlock.Lease
					err   error
				)
				if write {
					// Readers would starve writers (see the package doc), so a waiting writer asks readers
					// to hold off, and retries with a short pause.
					wantWrite.Add(1)
					for try := 0; ; try++ {
						lease, err = l.TryAcquireWrite(c, key, 30*time.Second)
						if !errors.Is(err, rwlock.ErrNotAcquired) || try == 200 {
							break
						}
						denied.Add(1)
						time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
					}
					wantWrite.Add(-1)
				} else {
					for wantWrite.Load() > 0 {
						time.Sleep(500 * time.Microsecond)
					}
					lease, err = l.TryAcquireRead(c, key, 30*time.Second)
				}
				if errors.Is(err, rwlock.ErrNotAcquired) {
					denied.Add(1)
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				// Count ourselves in before any other check, and out before releasing.
				if write {
					writers.Add(1)
					writes.Add(1)
				} else {
					n := readers.Add(1)
					reads.Add(1)
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
				}
				check()
				time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
				check()
				if write {
					writers.Add(-1)
				} else {
					readers.Add(-1)
				}
				out, err := lease.Release(c)
				if err != nil || out != rwlock.Released {
					errs <- errors.Join(err, errors.New("release: "+out.String()))
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
	t.Logf("reads %d, writes %d, denied %d, max concurrent readers %d", reads.Load(), writes.Load(), denied.Load(), maxReaders.Load())
	require.Zero(t, violations.Load(), "invariant violated")
	require.Positive(t, reads.Load())
	require.GreaterOrEqual(t, writes.Load(), int64(10), "writers must get in")
	e.requireAbsent(t, key)
}

// 3. A writer that never releases blocks readers until its TTL, then a reader gets in.
func testExpiryHandoff(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:handoff"
	l := e.locker(t)
	const ttl = 400 * time.Millisecond
	sent := time.Now()
	w, err := l.TryAcquireWrite(c, key, ttl)
	require.NoError(t, err)
	e.requireEntries(t, key, w)

	var r *rwlock.Lease
	eventually(t, 5*time.Second, "a reader after the writer's TTL", func() bool {
		r, err = l.TryAcquireRead(c, key, 30*time.Second)
		if errors.Is(err, rwlock.ErrNotAcquired) {
			return false
		}
		require.NoError(t, err)
		return true
	})
	require.GreaterOrEqual(t, time.Since(sent), ttl-20*time.Millisecond, "the reader got in before the writer's TTL")
	<-w.Done() // the local estimate ended no later than the server entry
	require.ErrorIs(t, w.Err(), rwlock.ErrExpired)
	ok, err := w.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	release(t, w, rwlock.NotOwned)
	e.requireEntries(t, key, r) // the writer's expired entry was pruned
	release(t, r, rwlock.Released)
	e.requireAbsent(t, key)
}

// 4. Each reader has its own expiry: reader A renews, reader B's entry still expires on time.
func testPerReaderExpiry(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:perreader"
	l := e.locker(t)
	const ttl = 600 * time.Millisecond
	a, err := l.TryAcquireRead(c, key, ttl)
	require.NoError(t, err)
	bSent := time.Now()
	b, err := l.TryAcquireRead(c, key, ttl)
	require.NoError(t, err)
	e.requireEntries(t, key, a, b)

	for time.Since(bSent) < ttl+300*time.Millisecond {
		time.Sleep(100 * time.Millisecond)
		ok, err := a.Extend(c)
		require.NoError(t, err)
		require.True(t, ok, "reader A renews")
	}
	// B was never renewed: its entry is gone (the read-only verify already sees it expired), A's is not.
	ok, err := b.Verify(c)
	require.NoError(t, err)
	require.False(t, ok, "reader B must have expired")
	ok, err = b.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	// A write attempt prunes B and is refused because of A.
	_, err = l.TryAcquireWrite(c, key, ttl)
	require.ErrorIs(t, err, rwlock.ErrNotAcquired)
	e.requireEntries(t, key, a)
	release(t, b, rwlock.NotOwned)
	release(t, a, rwlock.Released)
	e.requireAbsent(t, key)
}

// 5. An expired owner cannot renew or release its replacement; the replacement stays intact.
func testOwnerIsolation(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:isolation"
	l := e.locker(t)
	w1, err := l.TryAcquireWrite(c, key, 150*time.Millisecond)
	require.NoError(t, err)
	var w2 *rwlock.Lease
	eventually(t, 5*time.Second, "a replacement writer", func() bool {
		w2, err = l.TryAcquireWrite(c, key, 30*time.Second)
		return err == nil
	})
	require.NotEqual(t, w1.OwnerToken(), w2.OwnerToken())
	before := e.entries(t, key)[entry(w2)]

	ok, err := w1.Verify(c)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = w1.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	release(t, w1, rwlock.NotOwned)
	e.requireEntries(t, key, w2)
	require.Equal(t, before, e.entries(t, key)[entry(w2)], "the replacement's expiry must be untouched")
	ok, err = w2.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	release(t, w2, rwlock.Released)
	e.requireAbsent(t, key)
}

// 6. A renewal that finds the entry gone (deleted) ends the lease with ErrLost; later Extend calls
// return false without I/O; Release reports NotOwned. A renewal whose ctx already ended sends nothing
// and leaves the lease as it was.
func testFailedRenewal(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:renewal"
	l := e.locker(t)

	r, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, e.Raw.Do(c, e.Raw.B().Zrem().Key(key).Member(entry(r)).Build()).Error())
	ok, err := r.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	<-r.Done()
	require.ErrorIs(t, r.Err(), rwlock.ErrLost)
	ok, err = r.Extend(c)
	require.NoError(t, err)
	require.False(t, ok, "a lost lease never renews")
	release(t, r, rwlock.NotOwned)
	e.requireAbsent(t, key)

	w, err := l.TryAcquireWrite(c, key, 30*time.Second)
	require.NoError(t, err)
	deadline := w.Deadline()
	cancelled, cancel := context.WithCancel(c)
	cancel()
	ok, err = w.Extend(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, rwlock.ErrUncertain, "nothing was sent")
	require.False(t, ok)
	require.NoError(t, w.Err(), "the lease is unchanged")
	require.Equal(t, deadline, w.Deadline())
	ok, err = w.ExtendTTL(c, 20*time.Second+500*time.Microsecond)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 20*time.Second, w.TTL(), "ExtendTTL truncates to whole milliseconds")
	require.InDelta(t, 20_000, e.entries(t, key)[entry(w)]-e.serverMillis(t), 1000, "the entry's new expiry")
	e.requireEntries(t, key, w)
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// 7. A verification with a cancelled ctx (uncertain, or answered anyway) leaves the lease unchanged.
// A verification that finds this reader's entry gone ends that lease with ErrLost (Release: NotOwned),
// while another reader's entry in the same key still verifies.
func testVerify(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:verify"
	l := e.locker(t)
	w, err := l.TryAcquireWrite(c, key, 30*time.Second)
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(c)
	cancel()
	// An ended ctx sends nothing: an error wrapping ctx.Err() (not uncertain), and the lease is
	// unchanged.
	ok, err := w.Verify(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, rwlock.ErrUncertain)
	require.False(t, ok)
	require.NoError(t, w.Err(), "a failed verification must not end the lease")
	require.Positive(t, w.Remaining())
	ok, err = w.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = w.Extend(c)
	require.NoError(t, err)
	require.True(t, ok, "the lease is still usable")
	e.requireEntries(t, key, w)
	release(t, w, rwlock.Released)

	r1, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	r2, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, e.Raw.Do(c, e.Raw.B().Zrem().Key(key).Member(entry(r1)).Build()).Error())
	ok, err = r1.Verify(c)
	require.NoError(t, err)
	require.False(t, ok)
	select {
	case <-r1.Done():
	default:
		t.Fatal("Done must be closed once Verify found the entry gone")
	}
	require.ErrorIs(t, r1.Err(), rwlock.ErrLost)
	ok, err = r2.Verify(c)
	require.NoError(t, err)
	require.True(t, ok, "the other reader's entry is untouched")
	require.NoError(t, r2.Err())
	release(t, r1, rwlock.NotOwned)
	e.requireEntries(t, key, r2)
	release(t, r2, rwlock.Released)
	e.requireAbsent(t, key)
}

// 8. Binary keys and a binary prefix: the physical key is prefix+key, a sorted set holding the entries.
func testPrefixBinary(t *testing.T, e *env) {
	c := ctx(t)
	prefix, key := "\x00ck\xff:", "rw\x00\xfe{x}\n"
	physical := prefix + key
	l := e.locker(t, rwlock.WithKeyPrefix(prefix))
	r1, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	r2, err := l.TryAcquireRead(c, key, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, key, r1.Name())
	typ, err := e.Raw.Do(c, e.Raw.B().Type().Key(physical).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "zset", typ)
	e.requireEntries(t, physical, r1, r2)
	e.requireAbsent(t, key) // nothing at the unprefixed key
	now := e.serverMillis(t)
	got := e.entries(t, physical)
	require.InDelta(t, now+30_000, got[entry(r1)], 1000, "reader 1 expiry (server ms)")
	require.InDelta(t, now+10_000, got[entry(r2)], 1000, "reader 2 expiry (server ms)")
	release(t, r1, rwlock.Released)
	e.requireEntries(t, physical, r2) // the key's expiry moved down to the remaining reader
	release(t, r2, rwlock.Released)
	e.requireAbsent(t, physical)
}

// 9. Bad input fails before any I/O and writes nothing; a key of another type fails and is untouched.
func testBadInput(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:bad"
	_, err := rwlock.New(nil)
	require.ErrorIs(t, err, rwlock.ErrNilClient)
	l := e.locker(t)
	for _, ttl := range []time.Duration{0, 999 * time.Microsecond, -time.Second} {
		_, err := l.TryAcquireRead(c, key, ttl)
		require.ErrorIs(t, err, rwlock.ErrInvalidTTL)
		_, err = l.TryAcquireWrite(c, key, ttl)
		require.ErrorIs(t, err, rwlock.ErrInvalidTTL)
	}
	_, err = l.TryAcquireRead(c, "", time.Second)
	require.ErrorIs(t, err, luakit.ErrEmptyKey)
	_, err = l.TryAcquireWrite(c, "", time.Second)
	require.ErrorIs(t, err, luakit.ErrEmptyKey)
	e.requireAbsent(t, key)

	require.NoError(t, e.Raw.Do(c, e.Raw.B().Set().Key(key).Value("x").Build()).Error())
	_, err = l.TryAcquireWrite(c, key, time.Second)
	require.Error(t, err)
	require.NotErrorIs(t, err, rwlock.ErrNotAcquired)
	require.Contains(t, err.Error(), "WRONGTYPE")
	v, err := e.Raw.Do(c, e.Raw.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "x", v)
	require.NoError(t, e.Raw.Do(c, e.Raw.B().Del().Key(key).Build()).Error())
}

// 10. Release twice: Released, then AlreadyReleased without I/O; Close afterwards sends nothing.
func testReleaseTwice(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:twice"
	l := e.locker(t)
	r, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	release(t, r, rwlock.Released)
	require.ErrorIs(t, r.Err(), rwlock.ErrReleased)
	before := sumEval(e.CommandStats(t))
	release(t, r, rwlock.AlreadyReleased)
	require.NoError(t, r.Close())
	require.Equal(t, before, sumEval(e.CommandStats(t)), "no script after an answered release")
	e.requireAbsent(t, key)
}

func sumEval(st map[string]int64) int64 { return st["evalsha"] + st["eval"] }

// 11. SCRIPT FLUSH on every node between operations: EVALSHA answers NOSCRIPT and the EVAL fallback runs.
func testNoScript(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:noscript"
	l := e.locker(t)
	flush := func() {
		for _, n := range e.Nodes {
			_, err := n.Do(c, "SCRIPT", "FLUSH")
			require.NoError(t, err)
		}
	}
	flush()
	r, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	flush()
	ok, err := r.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	flush()
	ok, err = r.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	e.requireEntries(t, key, r)
	flush()
	release(t, r, rwlock.Released)
	e.requireAbsent(t, key)
}

// 12. Close releases best-effort, and never blocks much longer than the cleanup timeout even when the
// server does not answer (CLIENT PAUSE WRITE holds scripts: Close returns ErrUncertain); the release it
// sent runs once the server resumes, or the entry expires on its own.
func testClose(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:close"
	l := e.locker(t, rwlock.WithCleanupTimeout(200*time.Millisecond))
	r, err := l.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.ErrorIs(t, r.Err(), rwlock.ErrReleased)
	e.requireAbsent(t, key)
	release(t, r, rwlock.AlreadyReleased)

	const ttl = 1500 * time.Millisecond
	w, err := l.TryAcquireWrite(c, key, ttl)
	require.NoError(t, err)
	pauseWrites(t, e, 700*time.Millisecond)
	start := time.Now()
	err = w.Close()
	require.Less(t, time.Since(start), 700*time.Millisecond, "Close must be bounded by the cleanup timeout")
	require.ErrorIs(t, err, rwlock.ErrUncertain, "no reply within the cleanup timeout")
	require.ErrorIs(t, w.Err(), rwlock.ErrReleased)
	// The release may still run once the pause ends, or the entry expires after its TTL.
	eventually(t, 5*time.Second, "the entry to be gone", func() bool { return e.PTTL(t, key) == -2 })
}

// 13. An acquisition whose reply never comes (server holds scripts) is uncertain, never acquired; the
// owner-checked cleanup, sent within the bounded time and run once the server resumes, leaves it clean.
func testUncertainAcquire(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:uncertain"
	l := e.locker(t, rwlock.WithCleanupTimeout(100*time.Millisecond))
	const ttl = 1500 * time.Millisecond
	resumed := pauseWrites(t, e, 600*time.Millisecond)
	actx, cancel := context.WithTimeout(c, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	lease, err := l.TryAcquireWrite(actx, key, ttl)
	require.ErrorIs(t, err, rwlock.ErrUncertain)
	require.Nil(t, lease)
	require.Less(t, time.Since(start), 500*time.Millisecond, "bounded by ctx plus the cleanup timeout")
	// Both scripts wait for the pause to end; the cleanup runs after the acquisition, so the entry is gone
	// at once, long before its TTL. (Order across connections under a stopped server process is the
	// ownership conformance suite's case.)
	time.Sleep(time.Until(resumed) + 200*time.Millisecond)
	require.Empty(t, e.entries(t, key), "an entry was left: the cleanup ran before the acquisition")
	e.requireAbsent(t, key)
	// The key is free again.
	w, err := l.TryAcquireWrite(c, key, time.Second)
	require.NoError(t, err)
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// pauseWrites makes every node hold write commands (scripts included) for d, waits for the pause to end
// at t.Cleanup, and returns when the pause ends (at the latest).
func pauseWrites(t *testing.T, e *env, d time.Duration) time.Time {
	t.Helper()
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "CLIENT", "PAUSE", itoa(d.Milliseconds()), "WRITE")
		require.NoError(t, err)
	}
	until := time.Now().Add(d) // every node's pause began before now
	t.Cleanup(func() { time.Sleep(time.Until(until) + 50*time.Millisecond) })
	return until
}

// 14. A writer waiting behind a reader with a long TTL is woken by the reader's release (an
// invalidation of the key), not by the TTL: it must get in well before its 5 s ctx ends.
func testWaitWriterRelease(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:wait-w-release"
	holder := e.locker(t)
	waiter := e.trackedLocker(t)
	r, err := holder.TryAcquireRead(c, key, 30*time.Second)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(c, 5*time.Second)
	defer cancel()
	before := e.CommandStats(t)
	ch := acquireAsync(wctx, waiter.AcquireWrite, key, 30*time.Second)
	e.waitArmed(t, before)
	requirePending(t, ch)

	releasedAt := time.Now()
	release(t, r, rwlock.Released)
	got := await(t, ch, 10*time.Second)
	require.NoError(t, got.err, "the waiting writer must be woken by the release")
	t.Logf("release → write lease: %v", got.at.Sub(releasedAt))
	require.Less(t, got.at.Sub(releasedAt), 2*time.Second, "woken by the release, not a deadline")
	require.Equal(t, rwlock.Write, got.lease.Mode())
	e.requireEntries(t, key, got.lease)
	release(t, got.lease, rwlock.Released)
	e.requireAbsent(t, key)
}

// 15. A writer waiting behind two readers that never release gets in when the later one expires: on
// a client without tracking (no invalidation can arrive) it wakes at the holders' TTL that the
// acquisition script reports, not on a fixed period, and logs one warning per Locker.
func testWaitWriterExpiry(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:wait-w-expiry"
	holder := e.locker(t)
	logs := &countingHandler{}
	plain := e.NewClient(t, nil, matrix.NoCache)
	waiter, err := rwlock.New(plain, rwlock.WithLogger(slog.New(logs)))
	require.NoError(t, err)

	const ttl = 400 * time.Millisecond
	_, err = holder.TryAcquireRead(c, key, ttl/2)
	require.NoError(t, err)
	sent := time.Now()
	_, err = holder.TryAcquireRead(c, key, ttl)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(c, 5*time.Second)
	defer cancel()
	w, err := waiter.AcquireWrite(wctx, key, 30*time.Second)
	waited := time.Since(sent)
	require.NoError(t, err)
	t.Logf("write lease %v after the later reader's acquisition (TTL %v)", waited, ttl)
	require.GreaterOrEqual(t, waited, ttl-20*time.Millisecond, "the writer got in before the readers expired")
	require.Less(t, waited, ttl+350*time.Millisecond, "woken at the holders' TTL")
	require.EqualValues(t, 1, logs.warnings.Load(), "one warning about waiting without invalidations")
	e.requireEntries(t, key, w)

	// A second wait on the same Locker does not warn again.
	r, err := holder.TryAcquireRead(c, key+":2", 100*time.Millisecond)
	require.NoError(t, err)
	w2, err := waiter.AcquireWrite(wctx, key+":2", time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, logs.warnings.Load())
	release(t, w2, rwlock.Released)
	release(t, r, rwlock.NotOwned)
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// 16. A reader waiting behind a writer is woken by the writer's release; the tracker is given with
// WithTracker on a client whose invalidation hook the caller wired itself.
func testWaitReaderRelease(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:wait-r-release"
	holder := e.locker(t)
	tr := luakit.NewTracker()
	wc := e.NewClient(t, nil, func(o *rueidis.ClientOption) { o.OnInvalidations = tr.Hook(nil) })
	waiter, err := rwlock.New(wc, rwlock.WithTracker(tr))
	require.NoError(t, err)
	w, err := holder.TryAcquireWrite(c, key, 30*time.Second)
	require.NoError(t, err)

	rctx, cancel := context.WithTimeout(c, 5*time.Second)
	defer cancel()
	before := e.CommandStats(t)
	ch1 := acquireAsync(rctx, waiter.AcquireRead, key, 30*time.Second)
	ch2 := acquireAsync(rctx, waiter.AcquireRead, key, 30*time.Second)
	// Both attempts ran and tracking was armed (the second reader's PTTL may come from the local cache).
	eventually(t, 5*time.Second, "both readers to arm tracking", func() bool {
		st := e.CommandStats(t)
		return sumEval(st) >= sumEval(before)+2 && st["pttl"] > before["pttl"]
	})
	time.Sleep(100 * time.Millisecond)
	requirePending(t, ch1)
	requirePending(t, ch2)

	releasedAt := time.Now()
	release(t, w, rwlock.Released)
	r1, r2 := await(t, ch1, 10*time.Second), await(t, ch2, 10*time.Second)
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Less(t, r1.at.Sub(releasedAt), 2*time.Second, "woken by the release")
	require.Less(t, r2.at.Sub(releasedAt), 2*time.Second, "woken by the release")
	e.requireEntries(t, key, r1.lease, r2.lease) // both readers share it
	release(t, r1.lease, rwlock.Released)
	release(t, r2.lease, rwlock.Released)
	e.requireAbsent(t, key)
}

// 17. Ending ctx ends the wait with ctx.Err() (deadline or cancellation), promptly, never as
// ErrUncertain while asleep, and nothing of the waiter is written.
func testWaitCtx(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:wait-ctx"
	holder := e.locker(t)
	waiter := e.trackedLocker(t)
	w, err := holder.TryAcquireWrite(c, key, 30*time.Second)
	require.NoError(t, err)

	dctx, cancel := context.WithTimeout(c, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := waiter.AcquireRead(dctx, key, 30*time.Second)
	require.Nil(t, r)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 1500*time.Millisecond, "the wait ends with its ctx")

	cctx, cancel2 := context.WithCancel(c)
	waiter = e.trackedLocker(t) // a new client: the first one may answer its PTTL from its local cache
	before := e.CommandStats(t)
	ch := acquireAsync(cctx, waiter.AcquireWrite, key, 30*time.Second)
	e.waitArmed(t, before)
	requirePending(t, ch)
	cancel2()
	got := await(t, ch, 2*time.Second)
	require.Nil(t, got.lease)
	require.ErrorIs(t, got.err, context.Canceled)
	require.NotErrorIs(t, got.err, rwlock.ErrUncertain, "cancelled while asleep, not during an attempt")

	e.requireEntries(t, key, w) // only the holder
	release(t, w, rwlock.Released)
	e.requireAbsent(t, key)
}

// 18. While waiting the waiter sends nothing: over a 1 s window behind a holder with a 10 s TTL the
// servers run only a small constant number of commands besides the target's background commands
// (matrix.Env.CommandsSince). Then the release hands over.
func testWaitNoPolling(t *testing.T, e *env) {
	const (
		window  = time.Second
		maxCmds = 2
	)
	c := ctx(t)
	key := "ck:rw:wait-quiet"
	holder := e.locker(t)
	waiter := e.trackedLocker(t)
	w, err := holder.TryAcquireWrite(c, key, 10*time.Second)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(c, 15*time.Second)
	defer cancel()
	before := e.CommandStats(t)
	ch := acquireAsync(wctx, waiter.AcquireRead, key, 30*time.Second)
	stats0 := e.waitArmed(t, before)
	time.Sleep(window)
	d := e.CommandsSince(t, stats0)
	t.Logf("commands during a %v wait: %v", window, d)
	require.LessOrEqual(t, matrix.Total(d), int64(maxCmds), "the waiter polled while waiting: %v", d)
	requirePending(t, ch)

	release(t, w, rwlock.Released)
	got := await(t, ch, 5*time.Second)
	require.NoError(t, got.err)
	e.requireEntries(t, key, got.lease)
	release(t, got.lease, rwlock.Released)
	e.requireAbsent(t, key)
}

// 19. KeepAlive renews only its own entry: reader A outlives several TTLs while reader B, never
// renewed, expires on time; Release stops the renewals, and a writer then gets in.
func testKeepAlive(t *testing.T, e *env) {
	c := ctx(t)
	key := "ck:rw:keepalive"
	l := e.locker(t)
	const ttl = time.Second // renewed every third: 667ms of slack per renewal on a loaded machine
	a, err := l.TryAcquireRead(c, key, ttl)
	require.NoError(t, err)
	require.NoError(t, a.KeepAlive(c))
	require.ErrorIs(t, a.KeepAlive(c), rwlock.ErrKeepAliveRunning)
	b, err := l.TryAcquireRead(c, key, ttl)
	require.NoError(t, err)

	time.Sleep(3 * ttl)
	require.NoError(t, a.Err(), "A is renewed")
	ok, err := a.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	require.ErrorIs(t, b.Err(), rwlock.ErrExpired, "B was never renewed")
	_, err = l.TryAcquireWrite(c, key, ttl)
	require.ErrorIs(t, err, rwlock.ErrNotAcquired, "A still holds it")
	e.requireEntries(t, key, a) // B's entry was pruned

	release(t, a, rwlock.Released)
	e.requireAbsent(t, key)
	time.Sleep(ttl) // a renewal after the release would bring A's entry back
	e.requireAbsent(t, key)
	w, err := l.TryAcquireWrite(c, key, ttl)
	require.NoError(t, err)
	release(t, w, rwlock.Released)
	release(t, b, rwlock.NotOwned)
	e.requireAbsent(t, key)
}

// countingHandler is a slog.Handler that counts warnings.
type countingHandler struct{ warnings atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.warnings.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
